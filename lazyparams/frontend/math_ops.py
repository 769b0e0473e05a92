"""`lazyparams.ops`' math: elementwise functions, maximum / minimum, comparisons, logical_and /
logical_or, where, and the reductions sum, max, min and mean.

numpy's spellings over traced tensors, each binding one Relax op: `ops.abs(w)` is `R.abs`,
`ops.arccos` is `R.acos`, `ops.where(m, a, b)` is `R.where`, `ops.sum(w, axis=1)` is `R.sum`.
A Python scalar next to a tensor takes its dtype, as in the arithmetic. The names abs, sum, max
and min shadow the builtins here and in `ops`, which call none of them. Imports `ir` and the
frontend's own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lazyparams.frontend.axes import axis_index, int_values
from lazyparams.frontend.location import trace_error
from lazyparams.frontend.tensor import Tensor, binary_op, operand, tensor_operand
from lazyparams.ir.dtype import is_float

_F = TypeVar("_F", bound=Callable[..., Any])


def _named(fn: _F, name: str, doc: str) -> _F:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# Elementwise ----------------------------------------------------------------------------------


def _unary(op: str, name: str, what: str) -> Callable[[Tensor], Tensor]:
    """numpy's `name` of a float tensor, binding `R.<op>`."""

    def fn(x: Tensor) -> Tensor:
        x = tensor_operand(x, name)
        return Tensor(x.tracer, x.tracer.emit_op(op, (x.var,), {}, name))

    return _named(fn, name, f"numpy.{name}: the {what} of a float tensor, elementwise (R.{op}).")


def _binary(op: str, what: str) -> Callable[[Any, Any], Tensor]:
    """numpy's `op` of tensors, numpy arrays and scalars, binding `R.<op>`."""

    def fn(a: Any, b: Any) -> Tensor:
        return binary_op(op, a, b, op)

    doc = f"numpy.{op}: {what}, elementwise with broadcasting (R.{op}); scalars as in `add`."
    return _named(fn, op, doc)


abs = _unary("abs", "abs", "absolute value")
sign = _unary("sign", "sign", "sign (-1, 0 or 1)")
sqrt = _unary("sqrt", "sqrt", "square root")
sin = _unary("sin", "sin", "sine")
cos = _unary("cos", "cos", "cosine")
arccos = _unary("acos", "arccos", "arc cosine")
acos = arccos
exp = _unary("exp", "exp", "exponential")
log = _unary("log", "log", "natural logarithm")
square = _unary("square", "square", "square")

maximum = _binary("maximum", "the larger of each pair (NaN wins)")
minimum = _binary("minimum", "the smaller of each pair (NaN wins)")
greater = _binary("greater", "the bool mask of a > b")
greater_equal = _binary("greater_equal", "the bool mask of a >= b")
less = _binary("less", "the bool mask of a < b")
less_equal = _binary("less_equal", "the bool mask of a <= b")
equal = _binary("equal", "the bool mask of a == b")
not_equal = _binary("not_equal", "the bool mask of a != b")
logical_and = _binary("logical_and", "a and b of bool masks")
logical_or = _binary("logical_or", "a or b of bool masks")


def where(condition: Any, x: Any, y: Any) -> Tensor:
    """numpy.where(condition, x, y): x where the bool condition holds, else y (R.where); the
    three broadcast together. A scalar next to a tensor x or y takes its dtype; x and y both
    scalars or arrays take numpy's common dtype of the two."""
    like = next((v for v in (x, y) if isinstance(v, Tensor)), None)
    if like is None:
        x, y = _common_arrays(x, y)
        tracer, dtype = tensor_operand(condition, "where").tracer, ""
    else:
        tracer, dtype = tensor_operand(like, "where").tracer, like.dtype
    pairs = ((condition, "bool"), (x, dtype), (y, dtype))
    args = tuple(operand(tracer, value, of, "where") for value, of in pairs)
    return Tensor(tracer, tracer.emit_op("where", args, {}, "where"))


def _common_arrays(x: Any, y: Any) -> tuple[Any, Any]:
    """x and y as numpy arrays of the dtype numpy gives their mix (`where(m, 1.0, 0)`)."""
    import numpy as np

    dtype = np.result_type(x, y)
    return np.asarray(x, dtype), np.asarray(y, dtype)


# Reductions -----------------------------------------------------------------------------------

_WIDER_SUM = {
    **dict.fromkeys(("bool", "int4", "int8", "int16", "int32"), "int64"),
    **dict.fromkeys(("uint8", "uint16", "uint32"), "uint64"),
}
"""numpy's default dtype of a sum of bools and narrow ints (a float sum keeps its dtype)."""

Axis = int | Sequence[int] | None


def sum(x: Tensor, axis: Axis = None, dtype: object = None, *, keepdims: bool = False) -> Tensor:
    """numpy.sum over `axis` (every axis when None), as R.sum: in x's dtype, numpy's order.

    Without `dtype`, a bool or narrow int tensor is summed in int64 (uint64), as numpy does;
    with it, x is cast to `dtype` first and summed in it (`dtype="float32"` for a bfloat16 sum
    that would otherwise round every partial sum to bfloat16).
    """
    x = tensor_operand(x, "sum")
    return _reduce("sum", _reduce_in(x, dtype, _WIDER_SUM.get(x.dtype)), axis, keepdims)


def mean(x: Tensor, axis: Axis = None, dtype: object = None, *, keepdims: bool = False) -> Tensor:
    """numpy.mean over `axis`, as R.mean: the sum in x's dtype divided by the count.

    Without `dtype`, a bool or int tensor is averaged in float64, as numpy does; a float16 one
    stays in float16 (numpy's own default would sum it in float32: pass `dtype="float32"`).
    With `dtype`, x is cast to it first.
    """
    x = tensor_operand(x, "mean")
    default = None if is_float(x.dtype) else "float64"
    return _reduce("mean", _reduce_in(x, dtype, default), axis, keepdims)


def max(x: Tensor, axis: Axis = None, *, keepdims: bool = False) -> Tensor:
    """numpy.max over `axis` (every axis when None), as R.max (NaN wins)."""
    return _reduce("max", x, axis, keepdims)


def min(x: Tensor, axis: Axis = None, *, keepdims: bool = False) -> Tensor:
    """numpy.min over `axis` (every axis when None), as R.min (NaN wins)."""
    return _reduce("min", x, axis, keepdims)


def _reduce_in(x: Tensor, dtype: object, default: str | None) -> Tensor:
    """x cast to `dtype`, or to `default` when no dtype is given (x itself when neither is)."""
    from lazyparams.frontend import ops

    target = dtype if dtype is not None else default
    return x if target is None else ops.cast(x, target)


def _reduce(op: str, x: Tensor, axis: Axis, keepdims: bool) -> Tensor:
    """Bind `R.<op>(x, axis, keepdims)`, its axes made non-negative and checked here."""
    x = tensor_operand(x, op)
    attrs = {"axis": _axes(axis, x.ndim, op), "keepdims": keepdims}
    return Tensor(x.tracer, x.tracer.emit_op(op, (x.var,), attrs, op))


def _axes(axis: Axis, ndim: int, what: str) -> tuple[int, ...] | None:
    """The distinct non-negative axes `axis` names, or None for every axis."""
    if axis is None:
        return None
    axes = tuple(axis_index(a, ndim, what) for a in int_values(axis, what, "axes"))
    if len(set(axes)) != len(axes):
        raise trace_error(what, f"expected distinct axes, got {axis!r}")
    return axes


__all__ = [
    "abs",
    "acos",
    "arccos",
    "cos",
    "equal",
    "exp",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_or",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "not_equal",
    "sign",
    "sin",
    "sqrt",
    "square",
    "sum",
    "where",
]
