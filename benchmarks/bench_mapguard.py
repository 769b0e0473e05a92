"""What guarding tensor maps against a shrinking source costs on the normal path.

Maps every tensor of a safetensors file in the page cache the way `io.filemap` does, once
through a guarded map (`io.mapguard.guarded_map`, the default) and once through a plain
`mmap.mmap` window (no guard), alternating, and reports the best time of each for mapping
alone and for mapping and reading every byte, with the ratio:

    PYTHONPATH=. python benchmarks/bench_mapguard.py --tensors 400 --kib 256 --rounds 15
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from lazyparams.io.mapguard import _guard, guarded_map


def _plain_map(fd: int, offset: int, length: int) -> Any:
    """A read-only window of the file as `io.filemap` mapped before the guard."""
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    window = mmap.mmap(fd, offset - start + length, offset=start, access=mmap.ACCESS_READ)
    return np.frombuffer(window, np.uint8, length, offset - start)


def _guarded_map(fd: int, offset: int, length: int) -> Any:
    data = guarded_map(fd, offset, length, "bench", os.fstat(fd))
    return np.frombuffer(data, np.uint8, length)


def _ranges(path: Path) -> list[tuple[int, int]]:
    """(offset, length) of every tensor of the safetensors file."""
    import json

    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return [(8 + size + a, b - a) for a, b in (v["data_offsets"] for v in header.values())]


def _time(mapper: Callable[[int, int, int], Any], fd: int, ranges: list[Any], read: bool) -> float:
    start = time.perf_counter()
    for offset, length in ranges:
        array = mapper(fd, offset, length)
        if read:
            int(array.sum(dtype=np.uint64))
        del array
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tensors", type=int, default=400)
    parser.add_argument("--kib", type=int, default=256, help="size of each tensor")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if _guard() is None:
        raise SystemExit("the guard is not built (the compiled extension is missing)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.safetensors"
        count = args.kib * 256
        save_file({f"w{i}": np.full(count, i, np.float32) for i in range(args.tensors)}, path)
        ranges = _ranges(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            for read in (False, True):
                best = {"plain": float("inf"), "guarded": float("inf")}
                for _ in range(args.rounds):
                    for name, mapper in (("plain", _plain_map), ("guarded", _guarded_map)):
                        best[name] = min(best[name], _time(mapper, fd, ranges, read))
                what = "map and read" if read else "map only"
                print(
                    f"{what:12} {args.tensors} x {args.kib} KiB: plain {best['plain'] * 1e3:.2f} "
                    f"ms, guarded {best['guarded'] * 1e3:.2f} ms "
                    f"({best['guarded'] / best['plain']:.2f}x)"
                )
        finally:
            os.close(fd)


if __name__ == "__main__":
    main()
