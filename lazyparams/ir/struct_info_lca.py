"""The least specific common struct info of two: what an `If` of two branches is typed as.

Equal parts are kept; a differing dtype becomes unknown (`""`), a differing shape only its rank
(or an unknown rank), a differing kind `R.Object`. Imports `ir.struct_info` and `ir.prim` only.
"""

from __future__ import annotations

from lazyparams.ir.prim import PrimExpr
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)


def struct_info_lca(a: StructInfo, b: StructInfo) -> StructInfo:
    """The most specific struct info that both `a` and `b` are instances of."""
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        return _tensor_lca(a, b)
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo):
        if len(a.fields) != len(b.fields):
            return ObjectStructInfo()
        fields = zip(a.fields, b.fields, strict=True)
        return TupleStructInfo(tuple(struct_info_lca(x, y) for x, y in fields))
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo):
        if a.dtype != b.dtype:
            return ObjectStructInfo()
        same = a.value is not None and b.value is not None and same_dim(a.value, b.value)
        return a if same else PrimStructInfo(a.dtype)
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        if a.ndim != b.ndim:
            return ShapeStructInfo()
        if a.values is not None and b.values is not None and _same_dims(a.values, b.values):
            return a
        return ShapeStructInfo(ndim=a.ndim)
    if isinstance(a, FuncStructInfo) and isinstance(b, FuncStructInfo):
        same_params = a.params is not None and a.params == b.params
        return FuncStructInfo(
            a.params if same_params else None,
            struct_info_lca(a.ret, b.ret),
            a.purity and b.purity,
        )
    return ObjectStructInfo()


def _tensor_lca(a: TensorStructInfo, b: TensorStructInfo) -> TensorStructInfo:
    dtype = a.dtype if a.dtype == b.dtype else ""
    if a.ndim != b.ndim:
        return TensorStructInfo(None, dtype)
    if a.shape is not None and b.shape is not None and _same_dims(a.shape, b.shape):
        return TensorStructInfo(a.shape, dtype)
    return TensorStructInfo(None, dtype, a.ndim)


def _same_dims(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(same_dim(x, y) for x, y in zip(a, b, strict=True))


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two dims are the same expression (the same symbolic vars, not renamed ones)."""
    return a is b or a == b
