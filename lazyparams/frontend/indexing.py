"""numpy indexing of traced tensors: basic slices, integers, `None`, `...`, one index array.

A key becomes at most one `strided_slice` (slices and integers), one `take` (the index array)
and one `reshape` (dropping integer axes, adding `None` axes), so the result has the shape
numpy gives. Imports `ir` and the frontend's own modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyparams.frontend.location import trace_error
from lazyparams.frontend.tensor import Tensor
from lazyparams.ir.dtype import is_int
from lazyparams.ir.expr import Constant, Expr

_WHAT = "[]"


@dataclass(slots=True)
class _Plan:
    """What a key asks for, axis by axis of the input."""

    begin: dict[int, int] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)
    stride: dict[int, int] = field(default_factory=dict)
    gather: tuple[int, Expr, tuple[int, ...]] | None = None
    out_shape: list[int] = field(default_factory=list)


def index(x: Tensor, key: Any) -> Tensor:
    """`x[key]` with numpy's meaning, or a TraceError for keys outside the supported subset."""
    x.tracer.check_running(_WHAT)
    entries = _expand_ellipsis(key if isinstance(key, tuple) else (key,), x.ndim)
    plan = _plan(x, entries)
    result = x
    if plan.begin:
        axes = tuple(sorted(plan.begin))
        attrs = {
            "axes": axes,
            "begin": tuple(plan.begin[a] for a in axes),
            "end": tuple(plan.end[a] for a in axes),
            "strides": tuple(plan.stride[a] for a in axes),
        }
        result = Tensor(x.tracer, x.tracer.emit_op("strided_slice", (x.var,), attrs, _WHAT))
    if plan.gather is not None:
        axis, indices, _ = plan.gather
        var = x.tracer.emit_op("take", (result.var, indices), {"axis": axis}, _WHAT)
        result = Tensor(x.tracer, var)
    if tuple(plan.out_shape) != result.shape:
        var = x.tracer.emit_op("reshape", (result.var,), {"shape": tuple(plan.out_shape)}, _WHAT)
        result = Tensor(x.tracer, var)
    return result


def _expand_ellipsis(entries: tuple[Any, ...], ndim: int) -> tuple[Any, ...]:
    ellipses = sum(1 for e in entries if e is Ellipsis)
    if ellipses > 1:
        raise trace_error(_WHAT, f"expected at most one '...' in an index, got {ellipses}")
    used = sum(1 for e in entries if e is not None and e is not Ellipsis)
    if used > ndim:
        raise trace_error(
            _WHAT, f"too many indices: expected at most {ndim} for a {ndim}-d tensor, got {used}"
        )
    if ellipses == 0:
        return entries + (slice(None),) * (ndim - used)
    at = next(i for i, e in enumerate(entries) if e is Ellipsis)
    return entries[:at] + (slice(None),) * (ndim - used) + entries[at + 1 :]


def _plan(x: Tensor, entries: tuple[Any, ...]) -> _Plan:
    _check_array_placement(entries)
    plan, axis = _Plan(), 0
    for entry in entries:
        if entry is None:
            plan.out_shape.append(1)
            continue
        dim = x.shape[axis]
        if isinstance(entry, slice):
            _plan_slice(plan, axis, entry, dim)
        elif _is_int(entry):
            at = _normalized(int(entry), dim, axis)
            plan.begin[axis], plan.end[axis], plan.stride[axis] = at, at + 1, 1
        else:
            _plan_gather(plan, x, axis, entry)
        axis += 1
    return plan


def _plan_slice(plan: _Plan, axis: int, entry: slice, dim: int) -> None:
    for part in (entry.start, entry.stop, entry.step):
        if part is not None and not _is_int(part):
            raise trace_error(_WHAT, f"expected integer slice bounds, got {entry}")
    if entry.step is not None and int(entry.step) == 0:
        raise trace_error(_WHAT, "expected a non-zero slice step, got 0")
    start, stop, step = slice(
        *(None if p is None else int(p) for p in (entry.start, entry.stop, entry.step))
    ).indices(dim)
    length = len(range(start, stop, step))
    plan.out_shape.append(length)
    if (start, stop, step) == (0, dim, 1):
        return
    if length == 0:
        # slice.indices may give -1 as an empty start; an empty slice needs no translating.
        plan.begin[axis], plan.end[axis], plan.stride[axis] = 0, 0, 1
        return
    # slice.indices gives -1 for "before the first element" when stepping down; numpy (and
    # strided_slice) read -1 as the last element, so spell it as -(dim + 1), which clamps.
    plan.begin[axis], plan.stride[axis] = start, step
    plan.end[axis] = stop if stop >= 0 else -(dim + 1)


def _plan_gather(plan: _Plan, x: Tensor, axis: int, entry: Any) -> None:
    if isinstance(entry, Tensor):
        if entry.tracer is not x.tracer:
            raise trace_error(_WHAT, "expected an index tensor of the same trace, got another's")
        if not is_int(entry.dtype):
            raise trace_error(_WHAT, f"expected an integer index tensor, got {entry.dtype}")
        plan.gather = (axis, entry.var, entry.shape)
        plan.out_shape.extend(entry.shape)
        return
    array = _index_array(entry)
    dim = x.shape[axis]
    if array.size and (array.min() < -dim or array.max() >= dim):
        raise trace_error(
            _WHAT, f"expected indices in [{-dim}, {dim}) for axis {axis}, got {array.tolist()}"
        )
    normalized = np.where(array < 0, array + dim, array).astype(np.int64)
    plan.gather = (axis, Constant(normalized), tuple(normalized.shape))
    plan.out_shape.extend(normalized.shape)


def _index_array(entry: Any) -> np.ndarray[Any, Any]:
    try:
        array = np.asarray(entry)
    except Exception as err:
        raise trace_error(
            _WHAT, f"expected an int, slice, None, ... or ints, got {entry!r}"
        ) from err
    if array.dtype == np.bool_:
        raise trace_error(_WHAT, "unsupported operation: boolean mask indexing")
    if not np.issubdtype(array.dtype, np.integer):
        raise trace_error(
            _WHAT, f"expected an int, slice, None, ... or an array of ints, got {entry!r}"
        )
    return array


def _check_array_placement(entries: tuple[Any, ...]) -> None:
    """One index array at most, and any integers right next to it (numpy then keeps its place)."""
    arrays = [i for i, e in enumerate(entries) if _is_array_entry(e)]
    if len(arrays) > 1:
        raise trace_error(
            _WHAT, f"unsupported operation: expected at most one index array, got {len(arrays)}"
        )
    if not arrays:
        return
    advanced = [i for i, e in enumerate(entries) if i in arrays or _is_int(e)]
    if advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise trace_error(
            _WHAT,
            "unsupported operation: an index array with integer indices not next to it "
            "(numpy moves such results to the front); index in two steps instead",
        )


def _is_array_entry(entry: Any) -> bool:
    return entry is not None and not isinstance(entry, slice) and not _is_int(entry)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _normalized(at: int, dim: int, axis: int) -> int:
    if not -dim <= at < dim:
        raise trace_error(
            _WHAT, f"expected an index in [{-dim}, {dim}) for axis {axis} of size {dim}, got {at}"
        )
    return at + dim if at < 0 else at
