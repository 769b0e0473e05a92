"""Ops that join, cut or gather along an axis: concat, split, strided_slice, take,
take_along_axis.

Each op is an `OpDef` registered on import, plus a constructor that builds and checks the call.
Extents follow numpy (negative indices, clamping, strides). Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lazyparams.ir.describe import describe, show_dim
from lazyparams.ir.dtype import is_int
from lazyparams.ir.expr import Call, Expr, Tuple
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import IntImm, PrimExpr, as_prim, const_int
from lazyparams.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from lazyparams.op.base import (
    OpDef,
    as_int,
    as_int_or_ints,
    as_ints,
    as_optional_int,
    as_optional_ints,
    attr,
    fail,
    make_call,
    norm_axes,
    norm_axis,
    register,
    same_dtype,
    tensor_operand,
    tuple_operand,
)
from lazyparams.op.dims import dims_differ, dims_equal, div_dim, simplify, slice_extent

# concat -------------------------------------------------------------------------------------


def _infer_concat(call: Call) -> TensorStructInfo:
    """Tensors joined along `axis`: that dim is the sum, every other must agree."""
    parts = tuple_operand(call, 0, "tensors")
    if not parts:
        fail("concat", "expected at least one tensor, got an empty tuple")
    dtype = same_dtype("concat", [p.dtype for p in parts], "tensors")
    ranks = sorted({p.ndim for p in parts if p.ndim != -1})
    if len(ranks) > 1:
        fail("concat", f"expected tensors of one rank, got ranks {ranks}")
    if not ranks:
        return TensorStructInfo(None, dtype)
    axis = norm_axis("concat", attr(call, "axis"), ranks[0])
    shapes = [p.shape for p in parts]
    if any(s is None for s in shapes):
        return TensorStructInfo(None, dtype, ranks[0])
    dims = [
        joined_dim("concat", axis, i, [s[i] for s in shapes if s is not None])
        for i in range(ranks[0])
    ]
    if any(d is None for d in dims):
        return TensorStructInfo(None, dtype, ranks[0])
    return TensorStructInfo(tuple(d for d in dims if d is not None), dtype)


def joined_dim(op: str, axis: int, i: int, dims: list[PrimExpr]) -> PrimExpr | None:
    """Dim `i` of tensors joined along `axis` (by `op`, named in errors): the sum on `axis`,
    the common dim elsewhere (None if unprovable)."""
    if i == axis:
        total = dims[0]
        for d in dims[1:]:
            total = total + d
        return simplify(total)
    for d in dims[1:]:
        if dims_differ(d, dims[0]):
            fail(
                op,
                f"expected tensors whose dims off axis {axis} agree, got {show_dim(dims[0])} "
                f"and {show_dim(d)} on axis {i}",
            )
    return dims[0] if all(dims_equal(d, dims[0]) for d in dims[1:]) else None


def concat(tensors: Expr | Sequence[Expr], axis: int = 0) -> Call:
    """`R.concat((a, b), axis=0)`: numpy's concatenate; a list of operands becomes a Tuple."""
    operand = tensors if isinstance(tensors, Expr) else Tuple(tuple(tensors))
    return make_call("concat", [operand], {"axis": axis})


# split --------------------------------------------------------------------------------------


def _infer_split(call: Call) -> TupleStructInfo:
    """A tuple of pieces: `sections` equal ones, or the pieces between the split indices."""
    x = tensor_operand(call, 0)
    spec = attr(call, "indices_or_sections")
    if isinstance(spec, int) and spec <= 0:
        fail("split", f"expected a positive number of sections, got {spec}")
    count = spec if isinstance(spec, int) else len(spec) + 1
    if x.ndim == -1:
        return TupleStructInfo(tuple(TensorStructInfo(None, x.dtype) for _ in range(count)))
    axis = norm_axis("split", attr(call, "axis"), x.ndim)
    if x.shape is None:
        return TupleStructInfo(tuple(TensorStructInfo(None, x.dtype, x.ndim) for _ in range(count)))
    dim = x.shape[axis]
    extents = _sections(dim, spec) if isinstance(spec, int) else _pieces(dim, spec)
    fields: list[StructInfo] = []
    for extent in extents:
        shape = (*x.shape[:axis], extent, *x.shape[axis + 1 :])
        fields.append(TensorStructInfo(shape, x.dtype))
    return TupleStructInfo(tuple(fields))


def _sections(dim: PrimExpr, sections: int) -> list[PrimExpr]:
    """Extents of `sections` equal pieces of an axis of `dim`, which they must divide."""
    static = const_int(dim)
    if static is not None and static % sections != 0:
        fail("split", f"expected {sections} sections to divide the axis dim, got dim {static}")
    return [div_dim(dim, sections)] * sections


def _pieces(dim: PrimExpr, indices: tuple[int, ...]) -> list[PrimExpr]:
    """Extents of `x[:i0], x[i0:i1], ..., x[ik:]` along an axis of `dim`."""
    static = const_int(dim)
    bounds = (0, *indices)
    if static is not None:
        ends = (*indices, static)
        return [as_prim(len(range(static)[b:e])) for b, e in zip(bounds, ends, strict=True)]
    if any(i < 0 for i in indices):
        fail(
            "split",
            f"expected non-negative indices on the symbolic axis {show_dim(dim)}, "
            f"got {list(indices)}",
        )
    extents = [as_prim(max(e - b, 0)) for b, e in zip(bounds, indices, strict=False)]
    return [*extents, dim - indices[-1] if indices else dim]


def split(x: Expr, indices_or_sections: int | Sequence[int], axis: int = 0) -> Call:
    """`R.split(x, indices_or_sections, axis=0)`: numpy's split, into a tuple of tensors."""
    return make_call("split", [x], {"indices_or_sections": indices_or_sections, "axis": axis})


# strided_slice ------------------------------------------------------------------------------


def _infer_strided_slice(call: Call) -> TensorStructInfo:
    """`x[begin:end:stride]` on each listed axis, every other axis kept whole."""
    x = tensor_operand(call, 0)
    axes, begin, end = attr(call, "axes"), attr(call, "begin"), attr(call, "end")
    strides = attr(call, "strides")
    strides = (1,) * len(axes) if strides is None else strides
    for name, values in (("begin", begin), ("end", end), ("strides", strides)):
        if len(values) != len(axes):
            fail(
                "strided_slice",
                f"expected {name} of the same length as axes ({len(axes)}), got {list(values)}",
            )
    if 0 in strides:
        fail("strided_slice", f"expected non-zero strides, got {list(strides)}")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype)
    order = norm_axes("strided_slice", axes, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    for a, b, e, s in zip(order, begin, end, strides, strict=True):
        dims[a] = slice_extent(dims[a], b, e, s)
    return TensorStructInfo(tuple(dims), x.dtype)


def strided_slice(
    x: Expr,
    axes: Sequence[int],
    begin: Sequence[int | PrimExpr],
    end: Sequence[int | PrimExpr],
    strides: Sequence[int] | None = None,
) -> Call:
    """`R.strided_slice(x, axes, begin, end, strides=None)`: a numpy basic slice per axis;
    a bound may be an integer prim expression over the function's symbolic vars."""
    attrs = {"axes": axes, "begin": begin, "end": end, "strides": strides}
    return make_call("strided_slice", [x], attrs)


def _as_bounds(op: str, name: str, value: Any) -> tuple[int | PrimExpr, ...]:
    """Slice bounds: ints, or integer prim expressions where TVM writes `begin=[k]` (a static
    one folds to its int, so `[0]` and `[T.int64(0)]` are the same attr)."""
    if type(value) is tuple and all(type(v) is int for v in value):  # already canonical
        return value
    if not isinstance(value, Sequence) or isinstance(value, str):
        fail(op, f"expected {name} to be a list of ints, got {value!r}")
    bounds: list[int | PrimExpr] = []
    for v in value:
        symbolic = isinstance(v, PrimExpr) and not isinstance(v, IntImm)
        if symbolic and not is_int(v.dtype):
            fail(op, f"expected {name} of an integer dtype, got {show_dim(v)}: {v.dtype}")
        bounds.append(v if symbolic else as_int(op, name, v))
    return tuple(bounds)


# take ---------------------------------------------------------------------------------------


def _infer_take(call: Call) -> TensorStructInfo:
    """numpy's take: the indices' shape replaces `axis` (or the whole, flattened, tensor)."""
    x = tensor_operand(call, 0)
    idx = tensor_operand(call, 1, "indices")
    if idx.dtype and not is_int(idx.dtype):
        fail("take", f"expected indices of an integer dtype, got {describe(idx)}")
    axis = attr(call, "axis")
    if axis is None:
        return TensorStructInfo(idx.shape, x.dtype, idx.ndim)
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype)
    a = norm_axis("take", axis, x.ndim)
    if x.shape is None or idx.shape is None:
        ndim = -1 if idx.ndim == -1 else x.ndim - 1 + idx.ndim
        return TensorStructInfo(None, x.dtype, ndim)
    return TensorStructInfo(x.shape[:a] + idx.shape + x.shape[a + 1 :], x.dtype)


def take(x: Expr, indices: Expr, axis: int | None = None) -> Call:
    """`R.take(x, indices, axis=None)`: gather along an axis by a tensor of indices."""
    return make_call("take", [x, indices], {"axis": axis})


# take_along_axis ----------------------------------------------------------------------------


def _infer_take_along_axis(call: Call) -> TensorStructInfo:
    """numpy's take_along_axis: indices of x's rank; `axis` takes the indices' extent, every
    other dim is x's and the indices' broadcast (one of them 1, or both equal)."""
    x = tensor_operand(call, 0)
    idx = tensor_operand(call, 1, "indices")
    if idx.dtype and not is_int(idx.dtype):
        fail("take_along_axis", f"expected indices of an integer dtype, got {describe(idx)}")
    if x.ndim == -1 or idx.ndim == -1:
        return TensorStructInfo(None, x.dtype, max(x.ndim, idx.ndim))
    if x.ndim != idx.ndim:
        fail("take_along_axis", f"expected indices of x's rank {x.ndim}, got {describe(idx)}")
    a = norm_axis("take_along_axis", attr(call, "axis"), x.ndim)
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = [idx.shape[a] if i == a else _broadcast(d, idx.shape[i]) for i, d in enumerate(x.shape)]
    if any(d is None for d in dims):
        fail(
            "take_along_axis",
            f"expected indices that broadcast with x off axis {a}, got {describe(idx)} for "
            f"{describe(x)}",
        )
    return TensorStructInfo(tuple(d for d in dims if d is not None), x.dtype)


def _broadcast(a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """numpy's broadcast of one dim pair (None when they cannot broadcast)."""
    if dims_equal(a, b) or (isinstance(b, IntImm) and b.value == 1):
        return a
    if isinstance(a, IntImm) and a.value == 1:
        return b
    return None if dims_differ(a, b) else a


def take_along_axis(x: Expr, indices: Expr, axis: int) -> Call:
    """`R.take_along_axis(x, indices, axis)`: out[..., i, ...] = x[..., indices[..., i, ...],
    ...] along `axis`, as numpy's take_along_axis (indices broadcast off the axis)."""
    return make_call("take_along_axis", [x, indices], {"axis": axis})


_X = OpParam("x", "expr")

register(
    OpDef(
        "concat",
        (OpParam("tensors", "expr"), OpParam("axis", "attr", required=False, default=0)),
        _infer_concat,
        normalize={"axis": as_int},
    ),
    OpDef(
        "split",
        (
            _X,
            OpParam("indices_or_sections", "attr"),
            OpParam("axis", "attr", required=False, default=0),
        ),
        _infer_split,
        normalize={"indices_or_sections": as_int_or_ints, "axis": as_int},
    ),
    OpDef(
        "strided_slice",
        (
            _X,
            OpParam("axes", "attr"),
            OpParam("begin", "attr"),
            OpParam("end", "attr"),
            OpParam("strides", "attr", required=False),
        ),
        _infer_strided_slice,
        normalize={
            "axes": as_ints,
            "begin": _as_bounds,
            "end": _as_bounds,
            "strides": as_optional_ints,
        },
    ),
    OpDef(
        "take",
        (_X, OpParam("indices", "expr"), OpParam("axis", "attr", required=False)),
        _infer_take,
        normalize={"axis": as_optional_int},
    ),
    OpDef(
        "take_along_axis",
        (_X, OpParam("indices", "expr"), OpParam("axis", "attr")),
        _infer_take_along_axis,
        normalize={"axis": as_int},
    ),
)
