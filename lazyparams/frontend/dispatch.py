"""numpy functions and ufuncs applied to traced tensors (`np.transpose(w)`, `np.add(a, b)`).

numpy hands such calls to `Tensor.__array_function__` / `__array_ufunc__`; the ones with a
traced equivalent run it, every other one is refused at the user's line. Imports the
frontend's own modules only.
"""

from __future__ import annotations

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
    if handler is None:
        raise trace_error(f"np.{getattr(func, '__name__', func)}", _refusal())
    return handler(*args, **kwargs)


def _refusal() -> str:
    return (
        "unsupported operation on a traced tensor; supported: tensor methods and lazyparams.ops ("
        + ", ".join(sorted(ops.__all__))
        + ")"
    )
