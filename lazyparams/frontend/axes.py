"""Axis and integer arguments of the traced functions, checked and resolved at trace time.

Axes may be negative and are resolved against the static rank, so the IR holds plain
non-negative axes; a bad one is a TraceError at the user's line. Imports `ir` (integer test)
and the frontend's error location.
"""

from __future__ import annotations

from typing import Any

from lazyparams.frontend.location import trace_error
from lazyparams.ir.dtype import is_integer


def axis_index(axis: Any, ndim: int, what: str) -> int:
    """`axis` as a non-negative int below `ndim`, or a located error."""
    if not is_integer(axis):
        raise trace_error(what, f"expected an integer axis, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise trace_error(what, f"expected an axis in [{-ndim}, {ndim}), got {axis}")
    return int(axis) + ndim if axis < 0 else int(axis)


def int_values(values: Any, what: str, name: str) -> tuple[int, ...]:
    """A sequence of Python ints (numpy ints accepted; one int is a sequence of one), or a
    located error."""
    seq = values if isinstance(values, (tuple, list)) else (values,)
    if not all(is_integer(v) for v in seq):
        raise trace_error(what, f"expected {name} as integers, got {values!r}")
    return tuple(int(v) for v in seq)
