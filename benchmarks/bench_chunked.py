"""Benchmark: one tensor larger than the budget, converted in blocks of rows within it.

A float32 `lm_head.weight` of SIZE (by default 1 GiB: 32768 x 8192, the size of a tied
embedding table) is written as a safetensors checkpoint; then each recipe converts it in a
fresh interpreter, once under BUDGET (chunked) and once without a budget (whole), and the two
outputs are compared byte for byte. Recipes: `cast:float16`, `quantize-int8`, `quantize-int4`
and `fuse-qkv+cast:float16` (a transpose: column blocks in, row blocks out). Prints a markdown
table: the plan's predicted peak, the VM's metered peak, the peak RSS over the child's baseline
and the wall time.

    python -m benchmarks.bench_chunked --size 1GiB --budget 256MiB
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.rss import measure
from lazyparams.engine import convert, format_bytes, parse_size
from lazyparams.engine.process import tune_process_for_conversion
from lazyparams.io import TensorInfo, open_sink

RECIPES = ("cast:float16", "quantize-int8", "quantize-int4", "fuse-qkv+cast:float16")
NAME = "lm_head.weight"
HIDDEN = 8192
_WRITE_ROWS = 1024
_TARGET = "benchmarks.bench_chunked:convert_once"  # by name: run as a script this is __main__


def write_source(path: Path, size: int) -> Path:
    """A checkpoint of one float32 (size / 4 / HIDDEN, HIDDEN) tensor, written in row blocks so
    this process never holds it whole."""
    rows = max(1, size // (4 * HIDDEN))
    rng = np.random.default_rng(0)
    with open_sink(path, [TensorInfo.of(NAME, (rows, HIDDEN), "float32")]) as sink:
        for start in range(0, rows, _WRITE_ROWS):
            count = min(_WRITE_ROWS, rows - start)
            block = rng.standard_normal((count, HIDDEN), dtype=np.float32)
            sink.write_rows(NAME, start, block)  # type: ignore[attr-defined]
    return path


def convert_once(spec: str, src: str, dst: str, budget: int | None) -> None:
    """The measured call (in a child): convert, and leave the report's numbers beside `dst`."""
    with tune_process_for_conversion():  # as the command runs it
        report = convert(spec, src, dst, budget=budget, progress=False)
    numbers = {
        "predicted": report.predicted_peak_bytes,
        "measured": report.measured_peak_bytes,
        "outputs": report.tensors_written,
    }
    Path(f"{dst}.json").write_text(json.dumps(numbers))


def digest(path: Path) -> str:
    """The SHA-256 of a file, read 64 MiB at a time."""
    sha = hashlib.sha256()
    with open(path, "rb") as fp:
        while chunk := fp.read(64 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def run_recipe(spec: str, src: Path, folder: Path, budget: int) -> list[dict[str, Any]]:
    """One recipe chunked under `budget` and whole; a row per run."""
    rows, digests = [], []
    for label, limit in (("chunked", budget), ("whole", None)):
        dst = folder / f"{label}.safetensors"
        took = measure(_TARGET, spec, str(src), str(dst), limit)
        numbers = json.loads(Path(f"{dst}.json").read_text())
        digests.append(digest(dst))
        rows.append({"recipe": spec, "run": label, **numbers, **took._asdict()})
        dst.unlink()
    rows[0]["identical"] = digests[0] == digests[1]
    return rows


def table(rows: Sequence[dict[str, Any]], size: int, budget: int) -> str:
    """The markdown table of all runs."""
    lines = [
        f"One float32 tensor of {format_bytes(size)}, budget {format_bytes(budget)} "
        "(chunked) or none (whole).",
        "",
        "| recipe | run | predicted peak | VM peak | peak RSS | wall | same bytes |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        same = {True: "yes", False: "NO"}.get(row.get("identical"), "")  # type: ignore[call-overload]
        lines.append(
            f"| {row['recipe']} | {row['run']} | {format_bytes(row['predicted'])} | "
            f"{format_bytes(row['measured'])} | {format_bytes(row['peak_rss_bytes'])} | "
            f"{row['wall_s']:.1f} s | {same} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_chunked")
    parser.add_argument("--size", default="1GiB", help="bytes of the tensor (default 1GiB)")
    parser.add_argument("--budget", default="256MiB", help="the budget (default 256MiB)")
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), help="recipes to run")
    parser.add_argument("--folder", type=Path, default=None, help="scratch folder (a temp one)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    size, budget = parse_size(args.size), parse_size(args.budget)
    folder = Path(tempfile.mkdtemp(dir=args.folder))
    try:
        src = write_source(folder / "source.safetensors", size)
        rows = [row for spec in args.recipes for row in run_recipe(spec, src, folder, budget)]
    finally:
        shutil.rmtree(folder)
    text = table(rows, size, budget)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    chunked = [row for row in rows if row["run"] == "chunked"]
    ok = all(row["identical"] and row["measured"] <= budget for row in chunked)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
