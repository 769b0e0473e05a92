"""Weight quantization: symmetric per-channel int8 and group-wise packed int4, and inverses.

`quantize_int8(x, axis)` gives (int8 like x, float32 scales of x.shape[axis]);
`quantize_int4(x, group_size)` on (N, K) gives (uint8 (N, K/2) two nibbles a byte, float32
(N, K/group_size)); the dequantize ops take those pairs back to float32. Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.ir.describe import show_dim
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import InferFn, OpParam
from lazyparams.ir.prim import PrimExpr, const_int
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo
from lazyparams.op.base import (
    OpDef,
    as_int,
    attr,
    call_op_name,
    fail,
    make_call,
    norm_axis,
    register,
    require_dtype,
    require_float,
    require_rank,
    tensor_operand,
)
from lazyparams.op.dims import dims_differ, div_dim, simplify


def _pair(q: TensorStructInfo, scale: TensorStructInfo) -> TupleStructInfo:
    return TupleStructInfo((q, scale))


# int8 ---------------------------------------------------------------------------------------


def _infer_quantize_int8(call: Call) -> TupleStructInfo:
    """(int8 tensor of x's shape, float32 scales, one per index of `axis`)."""
    x = tensor_operand(call, 0)
    require_float("quantize_int8", x)
    if x.ndim == -1:
        return _pair(TensorStructInfo(None, "int8"), TensorStructInfo(None, "float32", 1))
    axis = norm_axis("quantize_int8", attr(call, "axis"), x.ndim)
    if x.shape is None:
        return _pair(TensorStructInfo(None, "int8", x.ndim), TensorStructInfo(None, "float32", 1))
    return _pair(TensorStructInfo(x.shape, "int8"), TensorStructInfo((x.shape[axis],), "float32"))


def _infer_dequantize_int8(call: Call) -> TensorStructInfo:
    """float32 of q's shape; the scales must have one entry per index of `axis`."""
    q, scale = tensor_operand(call, 0, "q"), tensor_operand(call, 1, "scale")
    require_dtype("dequantize_int8", q, "int8", "q")
    require_dtype("dequantize_int8", scale, "float32", "scale")
    require_rank("dequantize_int8", scale, 1, "scale")
    if q.ndim == -1:
        return TensorStructInfo(None, "float32")
    axis = norm_axis("dequantize_int8", attr(call, "axis"), q.ndim)
    if (
        q.shape is not None
        and scale.shape is not None
        and dims_differ(q.shape[axis], scale.shape[0])
    ):
        fail(
            "dequantize_int8",
            f"expected {show_dim(q.shape[axis])} scales (q's dim on axis {axis}), "
            f"got {show_dim(scale.shape[0])}",
        )
    return TensorStructInfo(q.shape, "float32", q.ndim)


# int4 ---------------------------------------------------------------------------------------


def _group_size(call: Call) -> int:
    """The call's group size, which must be positive."""
    group_size: int = attr(call, "group_size")
    if group_size <= 0:
        fail(call_op_name(call), f"expected a positive group_size, got {group_size}")
    return group_size


def _check_k(op: str, k: PrimExpr, group_size: int) -> None:
    """K must be even (two nibbles a byte) and a multiple of the group size, where static."""
    static = const_int(k)
    if static is not None and static % group_size != 0:
        fail(op, f"expected K divisible by group_size {group_size}, got K = {static}")
    if static is not None and static % 2 != 0:
        fail(op, f"expected an even K (two int4 values a byte), got K = {static}")


def _infer_quantize_int4(call: Call) -> TupleStructInfo:
    """(uint8 (N, K/2) packed nibbles, float32 (N, K/group_size) scales) for x of (N, K)."""
    x = tensor_operand(call, 0)
    require_float("quantize_int4", x)
    require_rank("quantize_int4", x, 2)
    group_size = _group_size(call)
    if x.shape is None:
        return _pair(TensorStructInfo(None, "uint8", 2), TensorStructInfo(None, "float32", 2))
    n, k = x.shape
    _check_k("quantize_int4", k, group_size)
    packed = TensorStructInfo((n, div_dim(k, 2)), "uint8")
    return _pair(packed, TensorStructInfo((n, div_dim(k, group_size)), "float32"))


def _infer_dequantize_int4(call: Call) -> TensorStructInfo:
    """float32 (N, K) from packed (N, K/2) uint8 and (N, K/group_size) float32 scales."""
    packed, scale = tensor_operand(call, 0, "packed"), tensor_operand(call, 1, "scale")
    require_dtype("dequantize_int4", packed, "uint8", "packed")
    require_dtype("dequantize_int4", scale, "float32", "scale")
    require_rank("dequantize_int4", packed, 2, "packed")
    require_rank("dequantize_int4", scale, 2, "scale")
    group_size = _group_size(call)
    if packed.shape is None:
        return TensorStructInfo(None, "float32", 2)
    n, k = packed.shape[0], simplify(packed.shape[1] * 2)
    _check_k("dequantize_int4", k, group_size)
    if scale.shape is not None:
        _check_scale_shape(scale.shape, n, div_dim(k, group_size))
    return TensorStructInfo((n, k), "float32")


def _check_scale_shape(shape: tuple[PrimExpr, ...], n: PrimExpr, groups: PrimExpr) -> None:
    for got, want, what in ((shape[0], n, "rows"), (shape[1], groups, "groups")):
        if dims_differ(got, want):
            fail(
                "dequantize_int4",
                f"expected scale of shape ({show_dim(n)}, {show_dim(groups)}) "
                f"(its {what} from packed), got {show_dim(got)} {what}",
            )


def quantize_int8(x: Expr, axis: int = 0) -> Call:
    """`R.quantize_int8(x, axis=0)`: symmetric per-channel int8 of a float tensor."""
    return make_call("quantize_int8", [x], {"axis": axis})


def dequantize_int8(q: Expr, scale: Expr, axis: int = 0) -> Call:
    """`R.dequantize_int8(q, scale, axis=0)`: float32 `q * scale` along `axis`."""
    return make_call("dequantize_int8", [q, scale], {"axis": axis})


def quantize_int4(x: Expr, group_size: int = 32) -> Call:
    """`R.quantize_int4(x, group_size=32)`: group-wise int4 of a (N, K) float tensor, packed."""
    return make_call("quantize_int4", [x], {"group_size": group_size})


def dequantize_int4(packed: Expr, scale: Expr, group_size: int = 32) -> Call:
    """`R.dequantize_int4(packed, scale, group_size=32)`: float32 (N, K) from nibbles."""
    return make_call("dequantize_int4", [packed, scale], {"group_size": group_size})


_AXIS = OpParam("axis", "attr", required=False, default=0)
_GROUP = OpParam("group_size", "attr", required=False, default=32)


def _codec(
    suffix: str, int_attr: OpParam, codes: str, infer: tuple[InferFn, InferFn]
) -> tuple[OpDef, OpDef]:
    """`quantize_<suffix>(x)` and `dequantize_<suffix>(<codes>, scale)`, both with `int_attr`."""
    quantize_params = (OpParam("x", "expr"), int_attr)
    dequantize_params = (OpParam(codes, "expr"), OpParam("scale", "expr"), int_attr)
    normalize = {int_attr.name: as_int}
    return (
        OpDef(f"quantize_{suffix}", quantize_params, infer[0], normalize=normalize),
        OpDef(f"dequantize_{suffix}", dequantize_params, infer[1], normalize=dict(normalize)),
    )


register(
    *_codec("int8", _AXIS, "q", (_infer_quantize_int8, _infer_dequantize_int8)),
    *_codec("int4", _GROUP, "packed", (_infer_quantize_int4, _infer_dequantize_int4)),
)
