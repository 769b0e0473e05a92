"""numpy kernels of the math ops: the unary float functions, comparisons, logical_and /
logical_or, where, and the reductions sum, max, min and mean.

Each computes in its operand's dtype, as numpy does on that dtype: numpy's own loops for
float16/32/64 and the ints, ml_dtypes' loops for bfloat16 and float8 (which compute each
element in float32 and round it back). Nothing is upcast here. Imports `ir` (dtypes) and the
runtime's kernel registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.dtype import from_numpy, is_float
from lazyparams.runtime.kernels import Array, Kernel, kernel, same_dtype

UNARY: dict[str, np.ufunc] = {
    "abs": np.absolute,
    "sign": np.sign,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "acos": np.arccos,
    "exp": np.exp,
    "log": np.log,
    "negative": np.negative,
    "square": np.square,
}

COMPARISONS: dict[str, np.ufunc] = {
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "equal": np.equal,
    "not_equal": np.not_equal,
}

LOGICAL: dict[str, np.ufunc] = {"logical_and": np.logical_and, "logical_or": np.logical_or}


def _float(name: str, x: Array) -> Array:
    """`x` if it is of a float dtype, else the error naming the op (its result would not be
    of x's dtype, as the op's inference promised)."""
    if not is_float(from_numpy(x.dtype)):
        raise RuntimeExecError(f"R.{name}: expected x of a float dtype, got {x.dtype}")
    return x


def _bool(name: str, what: str, x: Array) -> Array:
    """`x` if it is a bool tensor, else the error naming the op and the operand."""
    if x.dtype != np.bool_:
        raise RuntimeExecError(f"R.{name}: expected {what} of dtype bool, got {x.dtype}")
    return x


def _unary(name: str, ufunc: np.ufunc) -> Kernel:
    def run(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
        return np.asarray(ufunc(_float(name, np.asarray(ops[0]))))

    return run


def _comparison(name: str, ufunc: np.ufunc) -> Kernel:
    def run(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
        a, b = np.asarray(ops[0]), np.asarray(ops[1])
        same_dtype(a, b, name)
        return np.asarray(ufunc(a, b))

    return run


def _logical(name: str, ufunc: np.ufunc) -> Kernel:
    def run(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
        a, b = _bool(name, "x1", np.asarray(ops[0])), _bool(name, "x2", np.asarray(ops[1]))
        return np.asarray(ufunc(a, b))

    return run


for _name, _ufunc in UNARY.items():
    kernel(_name)(_unary(_name, _ufunc))
for _name, _ufunc in COMPARISONS.items():
    kernel(_name)(_comparison(_name, _ufunc))
for _name, _ufunc in LOGICAL.items():
    kernel(_name)(_logical(_name, _ufunc))


@kernel("where")
def _where(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    condition = _bool("where", "condition", np.asarray(ops[0]))
    a, b = np.asarray(ops[1]), np.asarray(ops[2])
    return np.asarray(np.where(condition, a, b)).astype(same_dtype(a, b, "where"), copy=False)


# Reductions ---------------------------------------------------------------------------------

Axes = tuple[int, ...] | None
Reduce = Callable[[Array, Axes, bool], Any]


def _sum(x: Array, axes: Axes, keepdims: bool) -> Any:
    """numpy's sum in x's own dtype (`dtype=x.dtype`: no widening of small ints or halves), in
    numpy's order: pairwise along the innermost axis for numpy's float types (float16 keeping
    float32 partial sums), element by element in the dtype for ml_dtypes' bfloat16 and float8,
    whose partial sums are rounded at each step (4096 ones sum to 256 in bfloat16)."""
    return np.sum(x, axis=axes, dtype=x.dtype, keepdims=keepdims)


def _mean(x: Array, axes: Axes, keepdims: bool) -> Any:
    """numpy's mean in x's dtype, as `np.mean(x, dtype=x.dtype)` computes it (the `_sum`, then a
    division by the count as an intp), written out so that a mean of no elements is NaN without
    numpy's warning."""
    total = np.asarray(_sum(x, axes, keepdims))
    return np.true_divide(total, np.intp(_count(x.shape, axes)), out=total, casting="unsafe")


def _count(shape: tuple[int, ...], axes: Axes) -> int:
    """How many elements each result of a reduction over `axes` of `shape` gathers."""
    count = 1
    for axis in range(len(shape)) if axes is None else axes:
        count *= shape[axis]
    return count


REDUCTIONS: dict[str, Reduce] = {
    "sum": _sum,
    "max": lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
    "min": lambda x, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
    "mean": _mean,
}


def _reduction(reduce: Reduce) -> Kernel:
    def run(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
        axis = attrs.get("axis")
        axes = (axis,) if isinstance(axis, int) else None if axis is None else tuple(axis)
        return np.asarray(reduce(np.asarray(ops[0]), axes, bool(attrs.get("keepdims"))))

    return run


for _name, _reduce in REDUCTIONS.items():
    kernel(_name)(_reduction(_reduce))
