"""Resident memory of this process: the peak over a baseline while a conversion runs.

A thread samples the resident size every millisecond. A process that opted in (`opt_in`: the
command line, which owns its process) also tunes glibc malloc, and has the kernel's high-water
mark reset at the start (`/proc/self/clear_refs`) and read at the end, so no peak is missed
between samples; a library call changes neither. Elsewhere there is no measurement (None).
Imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import threading
from types import TracebackType

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 128 * 1024
_malloc_tuned: list[bool] = []
_opted_in = [False]


def current_rss() -> int | None:
    """Bytes resident now, or None where /proc is not available."""
    try:
        with open("/proc/self/statm", "rb") as fp:
            return int(fp.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _high_water_mark() -> int | None:
    try:
        with open("/proc/self/status", "rb") as fp:
            for line in fp:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_high_water_mark() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fp:
            fp.write("5")
    except OSError:
        return False
    return _high_water_mark() is not None


def opt_in(on: bool) -> bool:
    """Let conversions change this process's malloc settings and peak-RSS mark (`on`), or
    leave them alone, as a library must. Returns whether malloc is tuned."""
    _opted_in[0] = on
    return on and _tune_malloc()


def _tune_malloc() -> bool:
    """Fix glibc's mmap threshold (once): by default it grows to the largest buffer freed so
    far, after which tensors of that size come from the heap and stay resident when freed, so
    memory would track the past rather than the plan. False off glibc."""
    try:
        if not _malloc_tuned:
            _malloc_tuned.append(
                bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD))
            )
    except (OSError, AttributeError):
        _malloc_tuned.append(False)
    return _malloc_tuned[0]


def release_freed_memory_promptly() -> bool:
    """In a process that opted in, hand freed heap memory back to the system now (with the
    threshold fixed, later frees go back at once). Returns whether malloc is tuned; a library
    call does nothing and returns False."""
    if not _opted_in[0] or not _tune_malloc():
        return False
    ctypes.CDLL(None).malloc_trim(0)
    return True


class PeakResident:
    """`with PeakResident() as meter:` ... then `meter.peak_bytes`: the peak resident bytes over
    the resident size at entry, or None where it cannot be measured."""

    def __init__(self) -> None:
        self.baseline = current_rss()
        self.peak_bytes: int | None = None
        self._sampled = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakResident:
        self.baseline = current_rss()
        reset = _opted_in[0] and _reset_high_water_mark()
        if self.baseline is not None and not reset:
            self._sampled = self.baseline
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self._sampled = max(self._sampled, current_rss() or 0)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.baseline is None:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            peak: int | None = max(self._sampled, current_rss() or 0)
        else:
            peak = _high_water_mark()
        self.peak_bytes = max((peak or self.baseline) - self.baseline, 0)
