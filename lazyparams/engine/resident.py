"""Resident memory of this process: the peak over a baseline while a conversion runs.

On Linux the kernel's high-water mark is reset at the start (`/proc/self/clear_refs`) and read
at the end, so no peak is missed between samples; where that is refused, a thread samples the
resident size every millisecond. Elsewhere there is no measurement (None). Imports only the
standard library.
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


def release_freed_memory_promptly() -> bool:
    """Make glibc malloc hand freed memory back to the system now and from now on.

    Freed heap memory is trimmed, and the mmap threshold is fixed: by default it grows to the
    largest buffer freed so far, after which tensors of that size come from the heap and stay
    resident when freed, so memory would track the past rather than the plan. Returns whether
    the setting took (False off glibc).
    """
    try:
        libc = ctypes.CDLL(None)
        if not _malloc_tuned:
            _malloc_tuned.append(bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)))
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        _malloc_tuned.append(False)
    return _malloc_tuned[0]


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
        if self.baseline is not None and not _reset_high_water_mark():
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
