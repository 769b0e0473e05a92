"""`R.layout_cast`: concatenate, permute and cast in one op, so a kernel moves the bytes once.

`R.layout_cast(tensors, axis=0, axes=[...], dtype="float16")` is
`R.astype(R.permute_dims(R.concat(tensors, axis), axes), dtype)`; `tensors` is one tensor (no
concatenation) or a tuple of them, whose dtypes may differ (each is cast to `dtype`). The
`FuseLayoutCast` pass writes it in place of those chains. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.ir.dtype import is_block
from lazyparams.ir.expr import Call, Expr, Tuple
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo
from lazyparams.op.base import (
    OpDef,
    as_dtype,
    as_int,
    as_ints,
    attr,
    fail,
    make_call,
    norm_axes,
    norm_axis,
    operand,
    register,
    tensor_operand,
    tuple_operand,
)
from lazyparams.op.index import joined_dim

NAME = "layout_cast"


def _parts(call: Call) -> list[TensorStructInfo]:
    """The tensors joined: the one tensor operand, or every field of a tuple operand."""
    if isinstance(operand(call, 0), TupleStructInfo):
        parts = tuple_operand(call, 0, "tensors")
        if not parts:
            fail(NAME, "expected at least one tensor, got an empty tuple")
        return parts
    return [tensor_operand(call, 0, "tensors")]


def _infer_layout_cast(call: Call) -> TensorStructInfo:
    """The joined shape permuted by `axes`, in `dtype`; parts of unknown rank or shape give
    a result of unknown shape."""
    parts, dtype = _parts(call), attr(call, "dtype")
    if is_block(dtype):
        fail(NAME, f"expected an element dtype, got block type {dtype}")
    ranks = sorted({p.ndim for p in parts if p.ndim != -1})
    if len(ranks) > 1:
        fail(NAME, f"expected tensors of one rank, got ranks {ranks}")
    axes = attr(call, "axes")
    if not ranks:
        return TensorStructInfo(None, dtype, len(axes))
    ndim = ranks[0]
    if len(axes) != ndim:
        fail(NAME, f"expected {ndim} axes for rank-{ndim} tensors, got {list(axes)}")
    order = norm_axes(NAME, axes, ndim)
    axis = norm_axis(NAME, attr(call, "axis"), ndim)
    shapes = [p.shape for p in parts]
    if any(s is None for s in shapes):
        return TensorStructInfo(None, dtype, ndim)
    dims = [joined_dim(NAME, axis, i, [s[i] for s in shapes if s is not None]) for i in range(ndim)]
    if any(d is None for d in dims):
        return TensorStructInfo(None, dtype, ndim)
    return TensorStructInfo(tuple(dims[a] for a in order), dtype)  # type: ignore[misc]


def layout_cast(
    tensors: Expr | Sequence[Expr], axes: Sequence[int], dtype: str, axis: int = 0
) -> Call:
    """`R.layout_cast(tensors, axis=axis, axes=axes, dtype=dtype)`: a list of operands
    becomes a Tuple."""
    operand_expr = tensors if isinstance(tensors, Expr) else Tuple(tuple(tensors))
    return make_call(NAME, [operand_expr], {"axis": axis, "axes": axes, "dtype": dtype})


def _as_axes(op: str, name: str, value: object) -> tuple[int, ...]:
    """The permutation attr: ints, required (no reversal by default as in permute_dims)."""
    if value is None:
        fail(op, f"expected attr {name} to be a list of ints, got None")
    return as_ints(op, name, value)


register(
    OpDef(
        NAME,
        (
            OpParam("tensors", "expr"),
            OpParam("axis", "attr", required=False, default=0),
            OpParam("axes", "attr"),
            OpParam("dtype", "attr"),
        ),
        _infer_layout_cast,
        normalize={"axis": as_int, "axes": _as_axes, "dtype": as_dtype},
    ),
)
