"""Benchmark: the memory floor of a streamed transpose on this machine, against memcpy.

A transpose reads tiles of input rows and writes a run of the tile's depth to every output row;
`transpose_floor.c` times those access patterns alone (no arithmetic) on a 4096 x 4096 matrix of
bytes, each against memcpy of the same 16 MiB, best of N. The runs each output row gets must be
long (256 bytes: 256 rows of 1-byte items, 128 of 2-byte ones) for the writes to go at the speed
of sequential ones, and the reads long within each row for the hardware prefetchers to follow
them; the table shows what each shape of tile costs before any register block runs, and what
reading and writing them in one pass does (the floor a transpose's register work adds to).
Needs an x86-64 C compiler (`cc`); prints a markdown table.

    python benchmarks/bench_transpose_floor.py --repeat 9
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("transpose_floor.c")


def build(folder: Path) -> Path:
    """Compile transpose_floor.c into `folder` and return the program's path."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("bench_transpose_floor: no C compiler (cc or gcc) on PATH")
    program = folder / "transpose_floor"
    subprocess.run([compiler, "-O2", "-o", str(program), str(SOURCE)], check=True)
    return program


def measure(program: Path, repeat: int) -> list[tuple[str, float, float]]:
    """Run the program: (pattern, best milliseconds, ratio to memcpy) for each pattern."""
    out = subprocess.run([str(program), str(repeat)], check=True, capture_output=True, text=True)
    rows = []
    for line in out.stdout.splitlines():
        name, ms, ratio = line.split("\t")
        rows.append((name, float(ms), float(ratio)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="rounds; the best time is kept")
    args = parser.parse_args(argv)
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"bench_transpose_floor: x86-64 only, this is {platform.machine()}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        rows = measure(build(Path(folder)), args.repeat)
    print(f"{platform.processor() or platform.machine()}; best of {args.repeat}\n")
    print("| pattern (16 MiB) | ms | / memcpy |\n|---|---|---|")
    for name, ms, ratio in rows:
        print(f"| {name} | {ms:.2f} | **{ratio:.2f}x** |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
