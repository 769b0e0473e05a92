"""The cold-cache read of the benchmarks: twice the largest cache sysfs reports, 96 MiB at
least, whatever the units or unreadable entries."""

from __future__ import annotations

from pathlib import Path

from benchmarks.cache_size import MIB, eviction_bytes, largest_cache_bytes


def _caches(folder: Path, sizes: dict[str, str]) -> Path:
    for index, size in sizes.items():
        (folder / index).mkdir()
        (folder / index / "size").write_text(size + "\n")
    return folder


def test_the_largest_cache_twice(tmp_path: Path) -> None:
    caches = _caches(tmp_path, {"index0": "48K", "index2": "2048K", "index3": "491520K"})
    assert largest_cache_bytes(caches) == 480 * MIB
    assert eviction_bytes(caches) == 960 * MIB


def test_small_caches_still_read_96_mib(tmp_path: Path) -> None:
    caches = _caches(tmp_path, {"index0": "32K", "index3": "32M"})
    assert largest_cache_bytes(caches) == 32 * MIB
    assert eviction_bytes(caches) == 96 * MIB


def test_no_or_unreadable_sizes(tmp_path: Path) -> None:
    assert largest_cache_bytes(tmp_path) == 0
    assert eviction_bytes(tmp_path) == 96 * MIB
    caches = _caches(tmp_path, {"index0": "lots", "index1": "1G", "index2": "3000000"})
    assert largest_cache_bytes(caches) == 1 << 30
    assert eviction_bytes(caches) == 2048 * MIB
