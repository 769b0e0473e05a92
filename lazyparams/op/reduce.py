"""Reductions: sum, max, min and mean of a tensor over some of its axes, or over all of them.

`axis` is None (every axis), an int or a list of ints, negative ones counting from the end; it
is kept as Relax prints it, a list (`axis=[1]`), and checked against the rank (in range,
distinct). `keepdims` leaves each reduced axis in place with size 1. The result keeps x's
dtype: sum, max and min take int and float tensors, mean float ones only (an int mean would
have to round). Imports `ir` and the op layer's helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lazyparams.ir.dtype import is_float, is_int
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import IntImm
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_bool,
    as_int_or_ints,
    attr,
    call_op_name,
    fail,
    make_call,
    norm_axes,
    register,
    require_float,
    tensor_operand,
)

REDUCTIONS: dict[str, str] = {
    "sum": "sum",
    "max": "largest element",
    "min": "smallest element",
    "mean": "mean",
}
"""The reductions by script name, and what each gives."""

_FLOAT_ONLY = frozenset({"mean"})
_ONE = IntImm(1)


def as_axes(op: str, name: str, value: Any) -> tuple[int, ...] | None:
    """The axis attr: None, or the axes of an int or a list of ints."""
    if value is None:
        return None
    axes = as_int_or_ints(op, name, value)
    return (axes,) if isinstance(axes, int) else axes


def _require_numeric(op: str, x: TensorStructInfo) -> None:
    """Refuse a (known) dtype the reduction has no meaning for: bool, or int for mean."""
    if op in _FLOAT_ONLY:
        require_float(op, x)
    elif x.dtype and not (is_float(x.dtype) or is_int(x.dtype)):
        fail(op, f"expected x of an int or float dtype, got {x.dtype}")


def _infer_reduction(call: Call) -> TensorStructInfo:
    """x's dtype, its reduced axes dropped (or of size 1 with keepdims)."""
    name = call_op_name(call)
    x = tensor_operand(call, 0)
    _require_numeric(name, x)
    axis, keepdims = attr(call, "axis"), attr(call, "keepdims")
    if x.ndim == -1:  # only a full reduction without keepdims has a known rank: 0
        return TensorStructInfo(None, x.dtype, 0 if axis is None and not keepdims else -1)
    reduced = set(range(x.ndim) if axis is None else norm_axes(name, axis, x.ndim, "axis"))
    ndim = x.ndim if keepdims else x.ndim - len(reduced)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, ndim)
    dims = [(_ONE if i in reduced else d) for i, d in enumerate(x.shape)]
    shape = dims if keepdims else [d for i, d in enumerate(x.shape) if i not in reduced]
    return TensorStructInfo(tuple(shape), x.dtype, ndim)


def _constructor(name: str) -> Callable[..., Call]:
    def build(x: Expr, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Call:
        return make_call(name, [x], {"axis": axis, "keepdims": keepdims})

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (
        f"`R.{name}(x, axis=None, keepdims=False)`: the {REDUCTIONS[name]} of x over `axis` "
        "(every axis when None), in x's dtype."
    )
    return build


sum, max, min, mean = map(_constructor, REDUCTIONS)  # in REDUCTIONS' order

_PARAMS = (
    OpParam("x", "expr"),
    OpParam("axis", "attr", required=False, default=None),
    OpParam("keepdims", "attr", required=False, default=False),
)

register(
    *(
        OpDef(name, _PARAMS, _infer_reduction, normalize={"axis": as_axes, "keepdims": as_bool})
        for name in REDUCTIONS
    )
)
