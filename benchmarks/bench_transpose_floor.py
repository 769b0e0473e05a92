"""Benchmark: the memory floor of a streamed transpose on this machine, against memcpy.

A transpose reads tiles of input rows and writes a run of the tile's depth to every output row;
`transpose_floor.c` times those access patterns alone (no arithmetic) on a square matrix of
bytes (4096 x 4096 unless `--side` says otherwise), each against memcpy of the same bytes, best
of N. The runs each output row gets must be long (128 bytes and more) for the writes to go at
the speed of sequential ones, and the reads long within each row for the hardware prefetchers
to follow them; the table shows what each shape of tile costs before any register block runs,
and what reading and writing them in one pass does (the floor a transpose's register work adds
to). At 8192, rows 8 KiB apart, the lines of one column of a tile share 8 sets of a 1 MiB
16-way L2 cache, 128 lines: a tile of 256 rows cannot keep them all there. Needs an x86-64 C
compiler (`cc`); prints a markdown table.

    python benchmarks/bench_transpose_floor.py --repeat 9 [--side 8192] [--cold]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, too

from benchmarks.cache_size import MIB, eviction_bytes

SOURCE = Path(__file__).with_name("transpose_floor.c")


def build(folder: Path, side: int = 4096) -> Path:
    """Compile transpose_floor.c for a `side` x `side` matrix into `folder` and return the
    program's path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("bench_transpose_floor: no C compiler (cc or gcc) on PATH")
    program = folder / "transpose_floor"
    subprocess.run([compiler, "-O2", f"-DN={side}", "-o", str(program), str(SOURCE)], check=True)
    return program


def measure(program: Path, repeat: int, cold: bool = False) -> list[tuple[str, float, float]]:
    """Run the program: (pattern, best milliseconds, ratio to memcpy) for each pattern; with
    `cold`, each pattern from a cache evicted by a read of other data."""
    argv = [str(program), str(repeat)]
    if cold:
        argv += ["cold", str(eviction_bytes() // MIB)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    rows = []
    for line in out.stdout.splitlines():
        name, ms, ratio = line.split("\t")
        rows.append((name, float(ms), float(ratio)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds; the best time is kept")
    parser.add_argument("--side", type=int, default=4096, help="rows and columns of the matrix")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="evict the caches (a read of twice the largest, at least 96 MiB) before each",
    )
    args = parser.parse_args(argv)
    if args.side < 4096 or args.side % 4096:
        print(
            f"bench_transpose_floor: --side must be a multiple of 4096, got {args.side}",
            file=sys.stderr,
        )
        return 2
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"bench_transpose_floor: x86-64 only, this is {platform.machine()}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        rows = measure(build(Path(folder), args.side), args.repeat, args.cold)
    cache = "cold" if args.cold else "warm"
    print(f"{platform.processor() or platform.machine()}; best of {args.repeat}, {cache} cache\n")
    mib = args.side * args.side >> 20
    print(f"| pattern ({args.side} x {args.side}, {mib} MiB) | ms | / memcpy |\n|---|---|---|")
    for name, ms, ratio in rows:
        print(f"| {name} | {ms:.2f} | **{ratio:.2f}x** |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
