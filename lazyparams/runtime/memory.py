"""The VM's memory meter: bytes of the arrays a running program holds, binding by binding.

An array counts once however many vars or tuples refer to it, from the binding that produces it
until the last of those references is dropped, or until it is handed off to a sink. The meter
also bounds the kernels' buffer pool (`headroom`). Imports numpy and `runtime.pool`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lazyparams.runtime.pool import BUFFERS


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """Bytes held when binding `index` (-1: the parameters) of `function` had just completed.

    Values whose last use is that binding are still counted: this is the moment its inputs and
    its result coexist, which is the real high-water mark of the step.
    """

    function: str
    index: int
    name: str
    bytes: int


@dataclass(slots=True)
class MemoryStats:
    """What `vm.stats` reports about the latest call: the peak, where it happened, the timeline."""

    current_bytes: int = 0
    peak_bytes: int = 0
    peak_binding: str | None = None
    """Name of the var bound where the peak happened ("(params)" for the parameters)."""
    peak_function: str | None = None
    peak_index: int | None = None
    timeline: list[TimelineEntry] = field(default_factory=list)


def array_leaves(value: Any) -> Iterator[np.ndarray[Any, Any]]:
    """The numpy arrays inside a value (a tuple is searched, nested tuples too)."""
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from array_leaves(item)


class MemoryMeter:
    """Counts each array once while any reference of the program's frames holds it."""

    def __init__(self) -> None:
        self.stats = MemoryStats()
        # id(array) -> [references, bytes counted]; the frames keep each array alive, so its id
        # cannot be reused while it is listed here.
        self._held: dict[int, list[int]] = {}

    def reset(self) -> None:
        """Start a new top-level call."""
        self.stats = MemoryStats()
        self._held.clear()

    def headroom(self) -> int:
        """Bytes the buffer pool may keep: what the program could still hold without passing
        the peak it has reached. Arrays from outside the pool (loads) make the pool shrink as
        they arrive; pool-served outputs only move bytes from the pool to the program."""
        stats = self.stats
        return max(stats.peak_bytes - stats.current_bytes, 0)

    def hold(self, value: Any) -> None:
        """A frame took one more reference to every array in `value`."""
        grew = False
        for arr in array_leaves(value):
            entry = self._held.get(id(arr))
            if entry is None:
                self._held[id(arr)] = [1, arr.nbytes]
                self.stats.current_bytes += arr.nbytes
                grew = True
            else:
                entry[0] += 1
        if grew and BUFFERS.free_bytes:
            BUFFERS.fit()

    def release(self, value: Any) -> None:
        """A frame dropped one reference to every array in `value`."""
        for arr in array_leaves(value):
            entry = self._held.get(id(arr))
            if entry is None:
                continue
            entry[0] -= 1
            if entry[0] == 0:
                del self._held[id(arr)]
                self.stats.current_bytes -= entry[1]

    def hand_off(self, value: Any) -> None:
        """The arrays in `value` now belong to a sink: they no longer count, even if still read."""
        for arr in array_leaves(value):
            entry = self._held.get(id(arr))
            if entry is not None:
                self.stats.current_bytes -= entry[1]
                entry[1] = 0

    def record(self, function: str, index: int, name: str) -> None:
        """Note the bytes held now, at the end of binding `index` of `function`."""
        stats = self.stats
        stats.timeline.append(TimelineEntry(function, index, name, stats.current_bytes))
        if stats.current_bytes > stats.peak_bytes or stats.peak_binding is None:
            stats.peak_bytes = stats.current_bytes
            stats.peak_binding, stats.peak_function, stats.peak_index = name, function, index
