"""The kernels' output buffers, reused once the program has freed them.

A fresh array's pages fault in on their first write, which costs about as much as a cast or a
copy itself. `BUFFERS.empty` hands out views of byte blocks it owns; when the last view of a
block dies, the block comes back, and the next output of the same byte size takes it with its
pages already in. The pool keeps a block only within the headroom of the program that a memory
meter watches (`BUFFERS.watch`): bytes it may hold without passing the peak it already reached.
Unwatched, it keeps nothing. Imports numpy and the standard library only.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
Headroom = Callable[[], int]

MIN_BYTES = 1 << 20
"""Outputs smaller than this come from numpy: the allocator's heap serves them paged in."""


class BufferPool:
    """Free byte blocks by size, kept within a watched program's headroom."""

    def __init__(self) -> None:
        self._free: dict[int, list[Array]] = {}
        self._free_bytes = 0
        self._watchers: list[Headroom] = []
        self._views: set[int] = set()  # ids of the memoryviews behind arrays handed out
        # reentrant: a collection inside a locked step may run a finalizer that gives back
        self._lock = threading.RLock()

    @property
    def free_bytes(self) -> int:
        """Bytes of the blocks waiting to be reused."""
        return self._free_bytes

    def empty(self, shape: Sequence[int], dtype: Any) -> Array:
        """An uninitialised C-contiguous array, as `np.empty` gives, reusing a freed block of its
        byte size where the pool holds one (only while a program is watched)."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_BYTES or dtype.hasobject or not self._watchers:
            return np.empty(tuple(shape), dtype)
        with self._lock:
            block = self._take(nbytes)
        return self._wrap(np.empty(nbytes, np.uint8) if block is None else block, shape, dtype)

    def owns(self, array: Array) -> bool:
        """Whether `array` is the root of a buffer this pool handed out (so it owns its memory
        as a fresh array does, although numpy's `base` says otherwise)."""
        return id(array.base) in self._views

    def fit(self) -> None:
        """Drop free blocks until they fit the headroom: the program's live bytes grew."""
        with self._lock:
            self._trim(self._headroom())

    @contextlib.contextmanager
    def watch(self, headroom: Headroom) -> Iterator[None]:
        """Keep freed blocks within `headroom()` while the `with` runs; at its end drop them all.
        Two programs watched at once (threads) share no meter: then the pool keeps nothing."""
        with self._lock:
            self._watchers.append(headroom)
        try:
            yield
        finally:
            with self._lock:
                self._watchers.remove(headroom)
                self._trim(self._headroom())

    def _headroom(self) -> int:
        return max(self._watchers[0](), 0) if len(self._watchers) == 1 else 0

    def _take(self, nbytes: int) -> Array | None:
        """A free block of `nbytes`, or None after making room for a new one: free blocks and
        the new one together stay within the headroom."""
        blocks = self._free.get(nbytes)
        if blocks:
            self._free_bytes -= nbytes
            return blocks.pop()
        self._trim(self._headroom() - nbytes)
        return None

    def _trim(self, limit: int) -> None:
        """Drop free blocks, largest first, until they hold at most `limit` bytes."""
        for size in sorted(self._free, reverse=True):
            blocks = self._free[size]
            while blocks and self._free_bytes > limit:
                blocks.pop()
                self._free_bytes -= size
            if not blocks:
                self._free.pop(size, None)

    def _wrap(self, block: Array, shape: Sequence[int], dtype: np.dtype[Any]) -> Array:
        """`block` as an array of `shape`; the block comes back when the last view dies."""
        flat = np.frombuffer(block.data, np.uint8)
        view = flat.base  # numpy's memoryview of the block: every view of flat keeps it alive
        assert isinstance(view, memoryview)
        self._views.add(id(view))
        done = weakref.finalize(view, self._give_back, id(view), block)
        done.atexit = False
        return flat.view(dtype).reshape(tuple(shape))

    def _give_back(self, view_id: int, block: Array) -> None:
        with self._lock:
            self._views.discard(view_id)
            if self._free_bytes + block.nbytes <= self._headroom():
                self._free.setdefault(block.nbytes, []).append(block)
                self._free_bytes += block.nbytes


BUFFERS = BufferPool()
"""The pool the kernels allocate their outputs from."""
