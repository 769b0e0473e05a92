"""Partial tensor I/O: reading a row or column block of a stored tensor, writing row blocks.

A tensor larger than the memory budget is converted block by block: a source hands out rows
[start, stop) (or the columns of a 2-D tensor) without reading the rest, and a sink takes rows
at their offset, counting the tensor complete once every row has arrived. `RowLedger` is that
bookkeeping, shared by the sinks and the engine's own output. Imports numpy and `io.dtypes`.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from lazyparams.errors import CheckpointError
from lazyparams.io.dtypes import dtype_name, holds, is_block, numpy_dtype, storage_shape

if TYPE_CHECKING:  # base imports this module for the sources' and sinks' partial I/O
    from numpy.typing import NDArray

    from lazyparams.io.base import TensorInfo

Array: TypeAlias = "NDArray[Any]"

BAND_BYTES = 8 * 1024 * 1024
"""Bytes of whole rows mapped at a time while a column block is gathered."""


def row_nbytes(info: TensorInfo) -> int:
    """Bytes of one row (one index of axis 0) of the tensor `info` describes."""
    return info.nbytes // info.shape[0] if info.shape and info.shape[0] else 0


def flat_info(info: TensorInfo) -> TensorInfo:
    """`info` seen as the rows blocks are written in: a tensor of three or more axes as
    [prod(shape[:-1]), shape[-1]], so that a block may hold part of one index of its first axis
    (some rows of one expert of a stacked tensor); a tensor of one or two axes as it is."""
    from dataclasses import replace
    from math import prod

    if len(info.shape) < 3:
        return info
    return replace(info, shape=(prod(info.shape[:-1]), info.shape[-1]))


def flat_block(info: TensorInfo, start: object, block: Array) -> tuple[object, Array]:
    """`(start, block)` as rows of `flat_info(info)`. A block of rank r holds rows of the tensor
    with its first n - r + 1 axes merged (full rank: rows of axis 0; rank 2: rows of the last
    axis), `start` counting those rows. A block that fits no such view is returned as it is,
    for the ledger's check to refuse by name."""
    from math import prod

    import numpy as np

    n, r = len(info.shape), np.ndim(block)
    if n < 3 or not 2 <= r <= n or isinstance(start, bool):
        return start, block
    trailing = storage_shape(info.dtype, info.shape)[n - r + 1 :]
    if tuple(np.shape(block)[1:]) != trailing or not isinstance(start, int | np.integer):
        return start, block
    merged = prod(info.shape[n - r + 1 : -1])
    return int(start) * merged, np.reshape(block, (-1, trailing[-1]))


def check_rows(info: TensorInfo, start: object, stop: object, where: str) -> tuple[int, int]:
    """`(start, stop)` as ints, checked to be a non-empty row range of the tensor."""
    if not info.shape:
        raise CheckpointError(f"{where}: tensor {info.name!r} is 0-d; expected rows to slice")
    if len(info.shape) == 1 and is_block(info.dtype):
        raise CheckpointError(
            f"{where}: tensor {info.name!r} is one row of {info.dtype} blocks; expected a "
            "tensor of rank >= 2 for a block of rows"
        )
    return _check_range(info, info.shape[0], start, stop, "rows", where)


def check_cols(info: TensorInfo, start: object, stop: object, where: str) -> tuple[int, int]:
    """`(start, stop)` as ints, checked to be a non-empty column range of a 2-D tensor."""
    if len(info.shape) != 2:
        raise CheckpointError(
            f"{where}: tensor {info.name!r}: expected a 2-D tensor for a column block, got "
            f"shape {list(info.shape)}"
        )
    if is_block(info.dtype):
        raise CheckpointError(
            f"{where}: tensor {info.name!r}: a {info.dtype} tensor's columns share blocks; "
            "expected a column block of an element dtype"
        )
    return _check_range(info, info.shape[1], start, stop, "columns", where)


def _check_range(
    info: TensorInfo, extent: int, start: object, stop: object, what: str, where: str
) -> tuple[int, int]:
    import numpy as np

    bounds = (start, stop)
    if not all(isinstance(b, int | np.integer) and not isinstance(b, bool) for b in bounds):
        raise CheckpointError(
            f"{where}: tensor {info.name!r}: expected int bounds of {what}, got {start!r}, {stop!r}"
        )
    first, end = int(start), int(stop)  # type: ignore[call-overload]
    if not 0 <= first < end <= extent:
        raise CheckpointError(
            f"{where}: tensor {info.name!r}: expected {what} 0 <= start < stop <= {extent}, "
            f"got [{first}, {end})"
        )
    return first, end


def gather_cols(
    info: TensorInfo, start: int, stop: int, rows: Callable[[int, int], Array]
) -> Array:
    """Columns [start, stop) of a 2-D tensor as a new C-ordered array, gathered from bands of
    whole rows that `rows(r0, r1)` reads, so that no more of the input than the block itself
    (and at most `BAND_BYTES`) is touched at a time."""
    import numpy as np

    count = info.shape[0]
    out = np.empty((count, stop - start), numpy_dtype(info.dtype))
    band = max(1, min(BAND_BYTES, out.nbytes) // max(1, row_nbytes(info)))
    for first in range(0, count, band):
        last = min(count, first + band)
        out[first:last] = rows(first, last)[:, start:stop]
    return out


# Sources without a partial read of their own ---------------------------------------------


def load_rows(source: Any, name: str, start: int, stop: int) -> Array:
    """Rows [start, stop) of tensor `name` of any source: its own `load_rows` where it has one,
    else a slice of `load` (cheap for memory-mapped sources, a whole read for the others)."""
    import numpy as np

    method = getattr(source, "load_rows", None)
    if callable(method):
        return method(name, start, stop)  # type: ignore[no-any-return]
    first, end = check_rows(source.info(name), start, stop, _where(source))
    return np.asarray(source.load(name))[first:end]


def load_cols(source: Any, name: str, start: int, stop: int) -> Array:
    """Columns [start, stop) of the 2-D tensor `name` of any source, as a contiguous array."""
    method = getattr(source, "load_cols", None)
    if callable(method):
        return method(name, start, stop)  # type: ignore[no-any-return]
    info = source.info(name)
    first, end = check_cols(info, start, stop, _where(source))
    return gather_cols(info, first, end, lambda r0, r1: load_rows(source, name, r0, r1))


def read_buffer_bytes(source: Any, names: Iterable[str]) -> int:
    """The most bytes one load of any of `names` holds beside the tensor it returns (the
    inflating buffers of a compressed source); 0 for sources that map or copy directly."""
    method = getattr(source, "read_buffer_bytes", None)
    if not callable(method):
        return 0
    return max((int(method(name)) for name in names), default=0)


def accepts_rows(sink: object) -> bool:
    """Whether `sink` takes row blocks (`write_rows(name, start, array)`)."""
    return callable(getattr(sink, "write_rows", None))


def _where(obj: Any) -> str:
    return str(getattr(obj, "path", type(obj).__name__))


# Row bookkeeping of sinks ----------------------------------------------------------------


@dataclass(slots=True)
class _Rows:
    """The row ranges of one tensor claimed so far (sorted, disjoint) and rows stored."""

    starts: list[int] = field(default_factory=list)
    stops: list[int] = field(default_factory=list)
    stored: int = 0


class RowLedger:
    """Which rows of each declared tensor have been claimed and stored, thread-safely.

    A writer first `claim`s a block (validated against the declaration, refused if it overlaps
    rows already claimed), stores it, then reports `stored`, which says whether the tensor is
    now complete. `is_done(name)` tells the ledger which tensors were written whole; `lock`
    is the one the owner takes to record those.
    """

    def __init__(
        self,
        path: str,
        infos: Mapping[str, TensorInfo],
        is_done: Callable[[str], bool],
        lock: threading.Lock | None = None,
    ) -> None:
        self.path, self.infos, self._is_done = path, infos, is_done
        self._rows: dict[str, _Rows] = {}
        # the owner's lock, when whole writes check `started` under it too
        self._lock = lock or threading.Lock()

    def started(self, name: str) -> bool:
        """Whether some rows of `name` were claimed and it is not complete yet."""
        return name in self._rows

    def progress(self, name: str) -> tuple[int, int] | None:
        """(rows stored, rows in all) of a tensor written in part, or None (rows of its
        `flat_info`)."""
        rows = self._rows.get(name)
        return None if rows is None else (rows.stored, flat_info(self.infos[name]).shape[0])

    def claim_whole(self, name: str, array: object, busy: set[str]) -> None:
        """Validate a whole tensor against its declaration and add it to `busy` (the names
        being written), refusing a second write of it, whole or by rows."""
        from lazyparams.io.base import check_declared  # base builds on this module

        check_declared(self.path, self.infos, name, array)
        with self._lock:
            if self._is_done(name) or self.started(name):
                raise CheckpointError(f"{self.path}: tensor {name!r} was written twice")
            busy.add(name)

    def claim(self, name: str, start: object, array: Array) -> tuple[int, Array]:
        """Validate a block of rows and reserve its range; returns its first row and the
        block in native byte order, both as rows of the tensor's `flat_info` (see
        `flat_block`), which is where `rows_offset` of that info places them."""
        import numpy as np

        from lazyparams.io.base import declared_info  # base builds on this module

        declared = declared_info(self.path, self.infos, name)
        info = flat_info(declared)
        start, array = flat_block(declared, start, np.asarray(array))
        block = _as_block(np.asarray(array), info, self.path)
        first, end = check_rows(info, start, _stop(start, block), self.path)
        with self._lock:
            if self._is_done(name):
                raise CheckpointError(f"{self.path}: tensor {name!r} was written twice")
            rows = self._rows.setdefault(name, _Rows())
            at = bisect.bisect_right(rows.starts, first)
            overlaps_before = at > 0 and rows.stops[at - 1] > first
            if overlaps_before or (at < len(rows.starts) and rows.starts[at] < end):
                raise CheckpointError(
                    f"{self.path}: tensor {name!r}: rows [{first}, {end}) were written twice; "
                    "expected each row once"
                )
            rows.starts.insert(at, first)
            rows.stops.insert(at, end)
        return first, block

    def stored(self, name: str, count: int) -> bool:
        """Record `count` more rows of `name` stored; True when that completes the tensor."""
        with self._lock:
            rows = self._rows[name]
            rows.stored += count
            if rows.stored < flat_info(self.infos[name]).shape[0]:
                return False
            del self._rows[name]
            return True

    def missing_message(self, name: str) -> str:
        """Why `name` is incomplete, for the error of a finalize that lacks it."""
        done = self.progress(name)
        if done is None:
            return f"tensor {name!r} was never written"
        return f"tensor {name!r} got only {done[0]} of its {done[1]} rows"


def _stop(start: object, block: Array) -> object:
    """Where a block of rows at `start` ends (None when `start` is no int: `check_rows` then
    refuses it by name)."""
    import numpy as np

    if isinstance(start, int | np.integer) and not isinstance(start, bool):
        return int(start) + block.shape[0]
    return None


def _as_block(array: Array, info: TensorInfo, path: str) -> Array:
    """`array` checked to be rows of `info`'s tensor (same dtype and trailing dims)."""
    if not info.shape:
        raise CheckpointError(f"{path}: tensor {info.name!r} is 0-d; expected rows to write")
    got = dtype_name(array.dtype) or str(array.dtype)
    trailing = storage_shape(info.dtype, info.shape)[1:]
    same_kind = holds(array.dtype, info.dtype) and array.ndim == len(info.shape)
    if not same_kind or array.shape[1:] != trailing:
        want = ", ".join(["n", *map(str, info.shape[1:])])
        raise CheckpointError(
            f"{path}: tensor {info.name!r}: expected rows {info.dtype}[{want}], "
            f"got {got}{list(array.shape)}"
        )
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def rows_offset(info: TensorInfo, start: int) -> int:
    """Byte offset of row `start` from the beginning of the tensor's data (C order)."""
    return start * row_nbytes(info)


__all__ = [
    "BAND_BYTES",
    "RowLedger",
    "accepts_rows",
    "check_cols",
    "check_rows",
    "flat_block",
    "flat_info",
    "gather_cols",
    "load_cols",
    "load_rows",
    "read_buffer_bytes",
    "row_nbytes",
    "rows_offset",
]
