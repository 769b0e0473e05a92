"""How much other data a benchmark reads to start a timed call from a cold cache.

A read evicts the CPU caches only if it is larger than the largest of them: 96 MiB is enough
for a 32 MiB L3, not for the 480 MiB some server CPUs report, where a kernel timed after it
would still find its input in the cache (a 32 MiB copy measured 2.9 ms after a read of 96 MiB,
4.3-4.7 ms after one of 1.5 GiB).
"""

from __future__ import annotations

from pathlib import Path

MIB = 1 << 20
LEAST_EVICTION_BYTES = 96 * MIB
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def _size_bytes(text: str) -> int:
    """Bytes of a sysfs cache size such as `491520K` or `32M`."""
    text = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def largest_cache_bytes(caches: Path = CACHES) -> int:
    """The size of the largest cache the first CPU reports (0 where sysfs does not say)."""
    sizes = []
    for entry in caches.glob("index*/size"):
        try:
            sizes.append(_size_bytes(entry.read_text()))
        except (OSError, ValueError):
            continue
    return max(sizes, default=0)


def eviction_bytes(caches: Path = CACHES) -> int:
    """Twice the largest cache, at least 96 MiB, in whole MiB."""
    wanted = max(LEAST_EVICTION_BYTES, 2 * largest_cache_bytes(caches))
    return -(-wanted // MIB) * MIB
