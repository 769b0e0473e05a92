"""numpy functions and ufuncs applied to traced tensors (`np.transpose(w)`, `np.add(a, b)`).

numpy hands such calls to `Tensor.__array_function__` / `__array_ufunc__`; the ones with a
traced equivalent run it, every other one is refused at the user's line. Imports the
frontend's own modules only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.frontend import ops
from lazyparams.frontend.location import trace_error

_UFUNCS: dict[Any, Callable[..., Any]] = {
    np.add: ops.add,
    np.subtract: ops.subtract,
    np.multiply: ops.multiply,
    np.divide: ops.divide,
    np.negative: ops.negative,
    np.positive: lambda x: x,
    np.matmul: ops.matmul,
    np.absolute: ops.abs,
    np.sign: ops.sign,
    np.sqrt: ops.sqrt,
    np.sin: ops.sin,
    np.cos: ops.cos,
    np.arccos: ops.arccos,
    np.exp: ops.exp,
    np.log: ops.log,
    np.square: ops.square,
    np.maximum: ops.maximum,
    np.minimum: ops.minimum,
    np.greater: ops.greater,
    np.greater_equal: ops.greater_equal,
    np.less: ops.less,
    np.less_equal: ops.less_equal,
    np.equal: ops.equal,
    np.not_equal: ops.not_equal,
    np.logical_and: ops.logical_and,
    np.logical_or: ops.logical_or,
}

_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.transpose: ops.transpose,
    np.permute_dims: ops.transpose,
    np.reshape: ops.reshape,
    np.squeeze: ops.squeeze,
    np.expand_dims: ops.expand_dims,
    np.concatenate: ops.concat,
    np.concat: ops.concat,
    np.stack: ops.stack,
    np.split: ops.split,
    np.take: ops.take,
    np.shape: lambda x: x.shape,
    np.ndim: lambda x: x.ndim,
    np.size: lambda x: x.size,
    np.zeros_like: ops.zeros_like,
    np.ones_like: ops.ones_like,
    np.where: ops.where,
    np.sum: ops.sum,
    np.mean: ops.mean,
    np.max: ops.max,
    np.amax: ops.max,
    np.min: ops.min,
    np.amin: ops.min,
}


def ufunc_call(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a numpy ufunc call on tensors, or refuse it naming the ufunc."""
    name = getattr(ufunc, "__name__", repr(ufunc))
    handler = _UFUNCS.get(ufunc)
    if handler is None or method != "__call__":
        spelled = name if method == "__call__" else f"{name}.{method}"
        raise trace_error(f"np.{spelled}", _refusal())
    if kwargs:
        raise trace_error(
            f"np.{name}",
            f"unsupported operation: expected no keyword arguments, got {sorted(kwargs)}",
        )
    return handler(*inputs)


def function_call(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a numpy function on tensors, or refuse it naming the function."""
    handler = _FUNCTIONS.get(func)
    what = f"np.{getattr(func, '__name__', func)}"
    if handler is None:
        raise trace_error(what, _refusal())
    try:
        return handler(*args, **kwargs)
    except TypeError:
        _check_arguments(what, handler, args, kwargs)
        raise


def _check_arguments(what: str, handler: Callable[..., Any], args: Any, kwargs: Any) -> None:
    """Refuse at the user's line arguments of a numpy function that the traced one has not
    (`out=`, `where=`, `initial=`); only once the call has failed, so the normal path pays
    nothing for it."""
    try:
        inspect.signature(handler).bind(*args, **kwargs)
    except TypeError as err:
        raise trace_error(what, f"unsupported arguments: {err}") from None


def _refusal() -> str:
    return (
        "unsupported operation on a traced tensor; supported: tensor methods and lazyparams.ops ("
        + ", ".join(sorted(ops.__all__))
        + ")"
    )
