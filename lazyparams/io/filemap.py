"""Arrays to and from byte ranges of open files: read-only maps, paced writes, background syncs.

Each mapped array gets its own mapping, so its pages leave the process as soon as the array is
dropped, rather than piling up in one whole-file map. The maps are guarded (`io.mapguard`): a
file that shrinks under one is a CheckpointError from the next write, never a crash or a
written tensor of zeros. Writes go to disk behind the writer, a bounded window at a time, and
a `BackgroundSync` thread makes them durable while the writer goes on. Imports numpy and
`io.mapguard` only.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from lazyparams.errors import CheckpointError
from lazyparams.io.mapguard import guarded_map, raise_if_source_shrank, read_range

if TYPE_CHECKING:  # numpy loads with the first array mapped or written: planning needs none
    import numpy as np
    from numpy.typing import NDArray

Array: TypeAlias = "NDArray[Any]"


def strided_view(elements: Array, shape: tuple[int, ...], strides: tuple[int, ...]) -> Array:
    """A read-only view of the 1-D `elements` with the given shape and element strides."""
    from numpy.lib.stride_tricks import as_strided

    dtype = elements.dtype
    byte_strides = tuple(s * dtype.itemsize for s in strides)
    # as_strided cannot carry ml_dtypes types, so stride the raw bits and reinterpret after
    bits = elements.view(f"u{dtype.itemsize}")
    return as_strided(bits, shape, byte_strides, writeable=False).view(dtype)


def strided_extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements spanned by a strided view (0 when it is empty): its largest index plus one."""
    if any(dim == 0 for dim in shape):
        return 0
    return 1 + sum((dim - 1) * stride for dim, stride in zip(shape, strides, strict=True))


def map_array(
    fd: int,
    offset: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None = None,
    *,
    path: str,
) -> Array:
    """A read-only array whose data starts at byte `offset` of the file `fd`.

    `strides` are in elements (C order when None). The array is a zero-copy view of a guarded
    map when `offset` suits the dtype's alignment, and an aligned copy otherwise; where no map
    can be guarded (see `io.mapguard`), its bytes are read into memory instead.
    """
    import numpy as np

    count = math.prod(shape) if strides is None else strided_extent(shape, strides)
    if count == 0:
        return _frozen(np.empty(shape, dtype))
    flat = _map_bytes(fd, offset, count * dtype.itemsize, path)
    if offset % dtype.alignment:
        flat = _frozen(flat.copy())
    elements = flat.view(dtype)
    if strides is None:
        return _remember_mapped(elements.reshape(shape), fd, offset)
    return strided_view(elements, shape, strides)


def _map_bytes(fd: int, offset: int, length: int, path: str) -> Array:
    """`length` bytes at `offset` as a read-only uint8 array backed by a guarded private map
    (or read into memory where no map can be guarded)."""
    import numpy as np

    info = os.fstat(fd)
    if offset + length > info.st_size:
        raise CheckpointError(
            f"{path}: tensor data [{offset}, {offset + length}) runs past the end of the file "
            f"({info.st_size} bytes); the file is truncated"
        )
    data = guarded_map(fd, offset, length, path, info)
    if data is None:
        data = read_range(fd, offset, length, path, info)
    return np.frombuffer(data, np.uint8, length)


def _frozen(array: Array) -> Array:
    array.flags.writeable = False
    return array


WRITE_CHUNK_BYTES = 16 << 20
"""Writes are cut into pieces of this size, each handed to the disk as soon as it is written."""

WRITE_BEHIND_BYTES = 128 << 20
"""How far the disk may lag behind the writer, per file. Past it, a writer waits for its oldest
bytes to reach the disk and drops them from the page cache: the cache then reuses pages it has
just freed, which take a copy several times faster than pages it must allocate afresh, and the
final sync finds at most this much left to write."""

WRITEBACK_MIN_BYTES = 1 << 20
"""Writes smaller than this are left to the kernel's own timing."""

WRITE_CALL_BYTES = 1 << 20
"""The most one write call copies. A buffered write holds the file's lock (one per inode, on
ext4 and most others) while it copies, so two workers writing into one file take turns; a
short turn rarely spans the holder losing its CPU to another process, which on a busy machine
otherwise leaves the other worker waiting for a whole time slice or more."""


def write_array_at(fd: int, array: Array, offset: int) -> None:
    """Write the bytes of `array` (C order) at `offset` of `fd`, looping over short writes.

    An array `map_array` mapped from a file is copied file to file by the kernel, its pages
    never read into the process. The bytes go to disk behind the writer (see
    `WRITE_BEHIND_BYTES`); an error the disk reports on the way raises OSError here, as a
    failed write does. A source file that shrank under a map while this array (or any
    other) was read from it raises CheckpointError, before the bytes are written where it
    can be known by then, else after.
    """
    import numpy as np

    raise_if_source_shrank()
    data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    pacer = _pacer_of(fd) if len(data) >= WRITEBACK_MIN_BYTES else None
    source = _mapped_source(array)
    for start in range(0, len(data), WRITE_CHUNK_BYTES):
        piece = data[start : start + WRITE_CHUNK_BYTES]
        if source is None or not _copy_range(source, start, fd, offset + start, len(piece)):
            source = None  # the kernel refused: write the rest from memory
            _write_from_memory(fd, piece, offset + start)
        if pacer is not None:
            pacer.written(fd, offset + start, len(piece))
    raise_if_source_shrank()


def _write_from_memory(fd: int, data: memoryview, offset: int) -> None:
    """`_pwrite_all`, except that bytes the kernel cannot read (a map past the end of a file
    that shrank: EFAULT) are copied here first, through the map's guard, which then reports
    the shrink."""
    try:
        _pwrite_all(fd, data, offset)
    except OSError as err:
        if err.errno != errno.EFAULT:
            raise
        _pwrite_all(fd, memoryview(bytes(data)), offset)


_MAPPED: dict[int, tuple[weakref.ref[Array], int, tuple[int, int], int]] = {}


def _remember_mapped(array: Array, fd: int, offset: int) -> Array:
    """Note that `array` holds the bytes at `offset` of the file `fd` (until it is dropped)."""
    key, info = id(array), os.fstat(fd)

    def forget(_: object) -> None:
        _MAPPED.pop(key, None)

    _MAPPED[key] = (weakref.ref(array, forget), fd, (info.st_dev, info.st_ino), offset)
    return array


def _mapped_source(array: Array) -> tuple[int, int] | None:
    """(descriptor, offset) of the file bytes `array` maps, if still open on the same file."""
    entry = _MAPPED.get(id(array))
    if entry is None or entry[0]() is not array:
        return None
    _, fd, identity, offset = entry
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return (fd, offset) if (info.st_dev, info.st_ino) == identity else None


def _copy_range(source: tuple[int, int], start: int, fd: int, offset: int, length: int) -> bool:
    """Copy `length` bytes from the source file (at its offset plus `start`) to `offset` of
    `fd` in the kernel; False where it cannot (another file system, no copy_file_range)."""
    copy = getattr(os, "copy_file_range", None)
    src_fd, src_offset = source[0], source[1] + start
    done = 0
    while copy is not None and done < length:
        try:
            copied = copy(src_fd, fd, length - done, src_offset + done, offset + done)
        except OSError:
            return False
        if copied == 0:
            return False
        done += copied
    return copy is not None


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of `data` at `offset`, `WRITE_CALL_BYTES` at most per call."""
    while data:
        written = os.pwrite(fd, data[:WRITE_CALL_BYTES], offset)
        data, offset = data[written:], offset + written


class _WriteBehind:
    """The bytes of one file written but not yet known to be on disk, oldest first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: deque[tuple[int, int]] = deque()
        self._bytes = 0

    def written(self, fd: int, offset: int, length: int) -> None:
        """Start writing these bytes back; wait for (and drop) the oldest past the window."""
        _start_writeback(fd, offset, length)
        settled = []
        with self._lock:
            self._ranges.append((offset, length))
            self._bytes += length
            while self._bytes > WRITE_BEHIND_BYTES:
                settled.append(self._ranges.popleft())
                self._bytes -= settled[-1][1]
        for old_offset, old_length in settled:  # outside the lock: other writers go on
            _settle(fd, old_offset, old_length)


_PACERS: dict[tuple[int, int], _WriteBehind] = {}
_PACERS_LOCK = threading.Lock()
_PACERS_KEPT = 64


def _pacer_of(fd: int) -> _WriteBehind:
    """The write-behind state of the file `fd` is open on (by device and inode, so a reused
    descriptor never sees another file's ranges); only the most recent files are kept."""
    info = os.fstat(fd)
    key = (info.st_dev, info.st_ino)
    with _PACERS_LOCK:
        pacer = _PACERS.pop(key, None) or _WriteBehind()
        _PACERS[key] = pacer  # most recent last
        while len(_PACERS) > _PACERS_KEPT:
            del _PACERS[next(iter(_PACERS))]
    return pacer


_SFR_WAIT_BEFORE, _SFR_WRITE, _SFR_WAIT_AFTER = 1, 2, 4
_sync_file_range: Callable[[int, int, int, int], int] | None = None
_sync_file_range_looked_up = False


def _range_syncer() -> Callable[[int, int, int, int], int] | None:
    """Linux's sync_file_range from the C library (the os module lacks it), or None."""
    global _sync_file_range, _sync_file_range_looked_up
    if not _sync_file_range_looked_up:
        _sync_file_range_looked_up = True
        with contextlib.suppress(OSError, AttributeError):
            import ctypes  # here: only a write of a large array needs it

            function = ctypes.CDLL(None, use_errno=True).sync_file_range
            function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            function.restype = ctypes.c_int
            _sync_file_range = function
    return _sync_file_range


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to write these bytes to disk now, without waiting for it."""
    syncer = _range_syncer()
    if syncer is not None:
        syncer(fd, offset, length, _SFR_WRITE)  # an error shows when the range is settled
    else:
        _drop_cached(fd, offset, length)  # elsewhere this starts the writeback too


def _settle(fd: int, offset: int, length: int) -> None:
    """Wait until these bytes are on disk (not yet durable: the file still needs a sync), then
    drop them from the page cache. A write error the disk reports raises OSError."""
    syncer = _range_syncer()
    if syncer is not None:
        flags = _SFR_WAIT_BEFORE | _SFR_WRITE | _SFR_WAIT_AFTER
        if syncer(fd, offset, length, flags) != 0:
            import ctypes

            code = ctypes.get_errno()
            if code in _WRITE_ERRORS:  # else the file system does not take it: advice only
                raise OSError(code, os.strerror(code))
    _drop_cached(fd, offset, length)


_WRITE_ERRORS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT})


def _drop_cached(fd: int, offset: int, length: int) -> None:
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        with contextlib.suppress(OSError):  # advice only: a file system may not take it
            advise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def sync_data(fd: int) -> None:
    """Make the data written to `fd` durable (fdatasync where there is one)."""
    getattr(os, "fdatasync", os.fsync)(fd)


class BackgroundSync:
    """Syncs files on a thread of its own, so the threads that write them go on meanwhile.

    Each `submit` names files and what to do once they are durable (journal the outputs in
    them, say); jobs run in order, each only after the syncs it asked for succeeded. After a
    failure no later job runs, and `wait` (or the next `submit`) raises it: for a failed sync,
    an OSError with the failing file as its `filename`.
    """

    def __init__(self) -> None:
        self._jobs: deque[tuple[list[tuple[int, str]], Callable[[], None]]] = deque()
        self._cv = threading.Condition()
        self._running = False
        self._closed = False
        self.failure: Exception | None = None
        self._thread = threading.Thread(target=self._serve, name="lazyparams-sync", daemon=True)
        self._thread.start()

    @property
    def idle(self) -> bool:
        """Whether no job is queued or running."""
        with self._cv:
            return not self._jobs and not self._running

    def submit(self, files: Sequence[tuple[int, str]], then: Callable[[], None]) -> None:
        """Sync the open files (descriptor, path), then call `then`, on the sync thread."""
        with self._cv:
            self._raise_failure()
            self._jobs.append((list(files), then))
            self._cv.notify_all()

    def wait(self) -> None:
        """Return once every job submitted so far is done; raise the failure if one failed."""
        with self._cv:
            while (self._jobs or self._running) and self.failure is None:
                self._cv.wait()
            self._raise_failure()

    def close(self) -> None:
        """Finish the queued jobs and stop the thread (idempotent; never raises)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _serve(self) -> None:
        while True:
            with self._cv:
                while not self._jobs and not self._closed:
                    self._cv.wait()
                if not self._jobs or self.failure is not None:
                    self._jobs.clear()
                    self._cv.notify_all()
                    if self._closed:
                        return
                    continue
                files, then = self._jobs.popleft()
                self._running = True
            failure = _run_job(files, then)
            with self._cv:
                self._running = False
                self.failure = self.failure or failure
                self._cv.notify_all()


def _run_job(files: list[tuple[int, str]], then: Callable[[], None]) -> Exception | None:
    """Sync `files` then call `then`; the first error instead (a failed sync's names its file)."""
    for fd, path in files:
        try:
            sync_data(fd)
        except OSError as err:
            return OSError(err.errno, err.strerror, path)
    try:
        then()
    except Exception as err:  # reported to the submitter, who raises it
        return err
    return None
