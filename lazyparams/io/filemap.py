"""Read-only arrays over a byte range of an open file, memory-mapped one tensor at a time.

Each array gets its own mapping, so its pages leave the process as soon as the array is dropped,
rather than piling up in one whole-file map. Imports numpy only.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided
from numpy.typing import NDArray

from lazyparams.errors import CheckpointError

Array = NDArray[Any]


def strided_view(elements: Array, shape: tuple[int, ...], strides: tuple[int, ...]) -> Array:
    """A read-only view of the 1-D `elements` with the given shape and element strides."""
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

    `strides` are in elements (C order when None). The array is a zero-copy view when `offset`
    suits the dtype's alignment, and an aligned copy otherwise.
    """
    count = math.prod(shape) if strides is None else strided_extent(shape, strides)
    if count == 0:
        return _frozen(np.empty(shape, dtype))
    flat = _map_bytes(fd, offset, count * dtype.itemsize, path)
    if offset % dtype.alignment:
        flat = _frozen(flat.copy())
    elements = flat.view(dtype)
    if strides is None:
        return elements.reshape(shape)
    return strided_view(elements, shape, strides)


def _map_bytes(fd: int, offset: int, length: int, path: str) -> Array:
    """`length` bytes at `offset` as a read-only uint8 array backed by a private mapping."""
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    size = os.fstat(fd).st_size
    if offset + length > size:
        raise CheckpointError(
            f"{path}: tensor data [{offset}, {offset + length}) runs past the end of the file "
            f"({size} bytes); the file is truncated"
        )
    window = mmap.mmap(fd, offset - start + length, offset=start, access=mmap.ACCESS_READ)
    return np.frombuffer(window, np.uint8, length, offset - start)


def _frozen(array: Array) -> Array:
    array.flags.writeable = False
    return array


def write_array_at(fd: int, array: Array, offset: int) -> None:
    """Write the bytes of `array` (C order) at `offset` of `fd`, looping over short writes,
    then start writing them back to disk (see `start_writeback`)."""
    data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    start = offset
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written
    start_writeback(fd, start, offset - start)


WRITEBACK_MIN_BYTES = 1 << 20


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to write these bytes back now, without waiting: the sync that publishes
    the output then finds them on disk instead of writing the whole file at its end, and the
    pages leave the cache once written. Small writes are left to the kernel's own timing."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None or length < WRITEBACK_MIN_BYTES:
        return
    with contextlib.suppress(OSError):  # advice only: a file system may not take it
        advise(fd, offset, length, os.POSIX_FADV_DONTNEED)
