"""Layout ops that keep every element: permute_dims, reshape, expand_dims, astype.

Each op is an `OpDef` (params, inference, attr normalisers) registered on import, plus a
constructor that builds and checks the call. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.ir.describe import show_dim, show_shape
from lazyparams.ir.dtype import is_block
from lazyparams.ir.expr import Call, Expr, ShapeExpr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import FloorDiv, IntImm, PrimExpr, const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_dtype,
    as_int_or_ints,
    as_optional_ints,
    as_shape,
    attr,
    fail,
    make_call,
    norm_axes,
    register,
    tensor_operand,
)
from lazyparams.op.dims import dims_differ, exact_div, product

# permute_dims -------------------------------------------------------------------------------


def _infer_permute_dims(call: Call) -> TensorStructInfo:
    """Dims reordered by `axes`; no axes reverses them, as numpy's transpose does."""
    x = tensor_operand(call, 0)
    axes = attr(call, "axes")
    if x.ndim == -1:
        if axes is not None:
            norm_axes("permute_dims", axes, len(axes))
        return TensorStructInfo(None, x.dtype, -1 if axes is None else len(axes))
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    if len(axes) != x.ndim:
        fail("permute_dims", f"expected {x.ndim} axes for a rank-{x.ndim} tensor, got {list(axes)}")
    order = norm_axes("permute_dims", axes, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    return TensorStructInfo(tuple(x.shape[a] for a in order), x.dtype)


def permute_dims(x: Expr, axes: Sequence[int] | None = None) -> Call:
    """`R.permute_dims(x, axes=...)`: numpy's transpose."""
    return make_call("permute_dims", [x], {"axes": axes})


# reshape ------------------------------------------------------------------------------------


def _infer_reshape(call: Call) -> TensorStructInfo:
    """The target shape, its one -1 resolved and its element count checked where known."""
    x = tensor_operand(call, 0)
    target = attr(call, "shape")
    hole = _hole_index(target)
    if x.shape is None:
        if hole is None:
            return TensorStructInfo(target, x.dtype)
        return TensorStructInfo(None, x.dtype, len(target))
    total = product(x.shape)
    if hole is None:
        if dims_differ(total, product(target)):
            fail(
                "reshape",
                f"expected a shape of {show_dim(total)} elements like {show_shape(x.shape)}, "
                f"got {show_shape(target)} with {show_dim(product(target))} elements",
            )
        return TensorStructInfo(target, x.dtype)
    known = product(d for i, d in enumerate(target) if i != hole)
    resolved = _resolve_hole(total, known, x.shape, target)
    return TensorStructInfo((*target[:hole], resolved, *target[hole + 1 :]), x.dtype)


def _hole_index(target: tuple[PrimExpr, ...]) -> int | None:
    """Position of the single -1 of a reshape target (None if absent); other negatives refused."""
    holes = [i for i, d in enumerate(target) if const_int(d) == -1]
    if len(holes) > 1:
        fail("reshape", f"expected at most one -1 in the shape, got {show_shape(target)}")
    for d in target:
        value = const_int(d)
        if value is not None and value < -1:
            fail("reshape", f"expected dims >= 0 or a single -1, got {value}")
    return holes[0] if holes else None


def _resolve_hole(
    total: PrimExpr, known: PrimExpr, shape: tuple[PrimExpr, ...], target: tuple[PrimExpr, ...]
) -> PrimExpr:
    """The dim a -1 stands for: the element count divided by the product of the other dims."""
    if const_int(known) == 0:
        fail("reshape", f"expected the dims beside -1 to be non-zero, got {show_shape(target)}")
    resolved = exact_div(total, known)
    if resolved is not None:
        return resolved
    if const_int(total) is not None and const_int(known) is not None:
        fail(
            "reshape",
            f"expected a shape whose dims divide {show_dim(total)} elements like "
            f"{show_shape(shape)}, got {show_shape(target)}",
        )
    return FloorDiv(total, known)


def reshape(x: Expr, shape: Sequence[PrimExpr | int] | ShapeExpr) -> Call:
    """`R.reshape(x, shape)`: numpy's reshape; `shape` may hold symbolic dims and one -1."""
    return make_call("reshape", [x], {"shape": shape})


# expand_dims --------------------------------------------------------------------------------


def _infer_expand_dims(call: Call) -> TensorStructInfo:
    """Size-1 dims inserted at `axis` (positions in the result, as numpy counts them)."""
    x = tensor_operand(call, 0)
    axis = attr(call, "axis")
    axes = (axis,) if isinstance(axis, int) else axis
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype)
    out_ndim = x.ndim + len(axes)
    new = set(norm_axes("expand_dims", axes, out_ndim, "axis"))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    rest = iter(x.shape)
    dims = [IntImm(1) if i in new else next(rest) for i in range(out_ndim)]
    return TensorStructInfo(tuple(dims), x.dtype)


def expand_dims(x: Expr, axis: int | Sequence[int]) -> Call:
    """`R.expand_dims(x, axis)`: numpy's expand_dims, one axis or several."""
    return make_call("expand_dims", [x], {"axis": axis})


# astype -------------------------------------------------------------------------------------


def _infer_astype(call: Call) -> TensorStructInfo:
    """The same shape in the new dtype; block types go through the GGUF ops instead."""
    x = tensor_operand(call, 0)
    dtype = attr(call, "dtype")
    if is_block(dtype):
        fail(
            "astype",
            f"expected an element dtype, got block type {dtype}; R.quantize_gguf quantizes to it",
        )
    return TensorStructInfo(x.shape, dtype, x.ndim)


def astype(x: Expr, dtype: str) -> Call:
    """`R.astype(x, dtype)`: elementwise conversion to any dtype of `ir.dtype`."""
    return make_call("astype", [x], {"dtype": dtype})


_X = OpParam("x", "expr")

register(
    OpDef(
        "permute_dims",
        (_X, OpParam("axes", "attr", required=False)),
        _infer_permute_dims,
        normalize={"axes": as_optional_ints},
    ),
    OpDef(
        "reshape",
        (_X, OpParam("shape", "attr")),
        _infer_reshape,
        normalize={"shape": as_shape},
    ),
    OpDef(
        "expand_dims",
        (_X, OpParam("axis", "attr")),
        _infer_expand_dims,
        normalize={"axis": as_int_or_ints},
    ),
    OpDef("astype", (_X, OpParam("dtype", "attr")), _infer_astype, normalize={"dtype": as_dtype}),
)
