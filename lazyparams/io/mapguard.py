"""Guarded maps of file ranges: a file that shrinks while it is mapped is an error, not a crash.

Reading a map past the end of a file truncated after it was mapped (rewritten by another
process, or on a network file system) raises SIGBUS, which ends the process. The guarded maps
of the `_mapguard` extension read as zeros there instead, and remember the fault; this module
notes the file and tensor each map holds, and `raise_if_source_shrank` turns a fault into a
CheckpointError naming them. Writers call it before and after each output they write, so the
zeros are never kept as data. Without the extension (it is optional), or where it cannot guard
another map (another SIGBUS handler replaced its own, or too many maps are live), callers read
the bytes with pread instead. Imports its extension only.
"""

from __future__ import annotations

import functools
import mmap
import os
import threading
import weakref
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from lazyparams.errors import CheckpointError


@dataclass(slots=True)
class _Window:
    """What a guarded map holds: `where` (the file, and the tensor where known), the byte
    range [start, end) of the file it maps, the file (descriptor and identity) and its size
    when it was mapped; `reported` once its fault was raised."""

    where: str
    start: int
    end: int
    fd: int
    identity: tuple[int, int]
    size: int
    reported: bool = False
    ref: weakref.ref[Any] | None = field(default=None, repr=False)


_LIVE: dict[int, _Window] = {}
"""The live guarded maps by slot (a slot is taken again only once its map is gone)."""
_SHRUNK: list[_Window] = []
"""Maps whose file shrank under them, not yet raised (their maps may be gone)."""
_LOCK = threading.RLock()  # re-entrant: a weakref callback may run while it is held
_seen_faults = 0


@functools.cache
def _guard() -> ModuleType | None:
    """The extension, where it was built."""
    try:
        from lazyparams.io import _mapguard
    except ImportError:
        return None
    return _mapguard


def guarded_map(fd: int, offset: int, length: int, where: str, info: os.stat_result) -> Any:
    """A read-only memoryview of the `length` (> 0) bytes at `offset` of the file `fd`, from
    a guarded map; None where no map can be guarded here. `info` is the file's `os.fstat`,
    `where` names the file and tensor for the error should the file shrink under the map."""
    window = _guarded(fd, offset, length, where, info)
    return None if window is None else memoryview(window)[offset % mmap.ALLOCATIONGRANULARITY :]


def guarded_file(fd: int, where: str, info: os.stat_result) -> Any:
    """The whole (non-empty) file `fd` as a guarded map that reads as an mmap does (its
    length, its slices as bytes, its buffer); None where no map can be guarded here."""
    return _guarded(fd, 0, info.st_size, where, info)


def _guarded(fd: int, offset: int, length: int, where: str, info: os.stat_result) -> Any:
    """A guarded map of `fd` from the page holding byte `offset` to `offset + length`, noted
    as holding `where` there, or None."""
    guard = _guard()
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    window = None if guard is None else guard.guard_map(fd, start, offset + length - start)
    if window is None:
        return None
    slot = window.slot
    identity = (info.st_dev, info.st_ino)
    record = _Window(where, offset, offset + length, fd, identity, info.st_size)
    record.ref = weakref.ref(window, lambda _: _released(slot))
    _LIVE[slot] = record
    return window


def read_range(fd: int, offset: int, length: int, where: str, info: os.stat_result) -> Any:
    """The `length` bytes at `offset` of the file `fd`, read into memory (a read-only
    memoryview); a CheckpointError naming `where` if the file ends first."""
    data = bytearray(length)
    view, done = memoryview(data), 0
    while done < length:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            identity = (info.st_dev, info.st_ino)
            raise _shrank_error(_Window(where, offset, offset + length, fd, identity, info.st_size))
        done += got
    return view.toreadonly()


def raise_if_source_shrank() -> None:
    """Raise a CheckpointError for the files that shrank under guarded maps while they were
    read (naming the first, counting the rest: each is raised once); nothing otherwise. Costs
    one call into the extension when nothing shrank, so writers call it around every output
    they write."""
    shrunk = _take_shrunk()
    if shrunk:
        error = _shrank_error(shrunk[0])
        if len(shrunk) > 1:
            error = CheckpointError(f"{error} (and {len(shrunk) - 1} more maps of it or others)")
        raise error


def forget_earlier_faults() -> None:
    """Drop the faults found so far: a conversion calls this first, so that a map which
    outlived an earlier one (an array it handed to a dict) cannot fail this one."""
    _take_shrunk()


def _take_shrunk() -> list[_Window]:
    """Every map that faulted and was not raised yet, no longer pending."""
    guard = _guard()
    if guard is None or (not _SHRUNK and guard.guard_faults() == _seen_faults):
        return []
    with _LOCK:
        _collect(guard)
        shrunk = list(_SHRUNK)
        _SHRUNK.clear()
    return shrunk


def _collect(guard: ModuleType) -> None:
    """Move the live maps that faulted since the last look onto `_SHRUNK`."""
    global _seen_faults
    _seen_faults = guard.guard_faults()  # first: a fault after this is found next time
    for slot, window in list(_LIVE.items()):
        if not window.reported and guard.guard_faulted(slot):
            window.reported = True
            _SHRUNK.append(window)


def _released(slot: int) -> None:
    """A guarded map is gone: keep its record if it faulted and was not raised yet (the
    extension frees the slot only after this runs, so it can still be asked)."""
    window, guard = _LIVE.pop(slot, None), _guard()
    if window is None or guard is None:
        return
    with _LOCK:
        if not window.reported and guard.guard_faulted(slot):
            window.reported = True
            _SHRUNK.append(window)


def _shrank_error(window: _Window) -> CheckpointError:
    now = _size_now(window)
    shrank = f"shrank to {now} bytes" if now is not None else f"shrank below {window.end} bytes"
    return CheckpointError(
        f"{window.where}: the file {shrank} while its bytes [{window.start}, {window.end}) "
        f"were being read; expected at least {window.end} bytes (it had {window.size} when "
        "the read began): the source changed while it was being read"
    )


def _size_now(window: _Window) -> int | None:
    """The file's size now, where its descriptor is still open on it."""
    try:
        info = os.fstat(window.fd)
    except OSError:
        return None
    return info.st_size if (info.st_dev, info.st_ino) == window.identity else None
