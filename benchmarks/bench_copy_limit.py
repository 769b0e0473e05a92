"""`lazyparams convert` against the copy limit: `cat SHARDS > OUT && sync OUT`.

Each contender runs as the command a user types, in a fresh process, side by side in one run
and alternating: every repetition runs the copy, then each recipe with each worker count, in an
order rotated by one from the last repetition's. Reported: the median wall time (durability
included: the copy syncs its file, a conversion returns once its output is on disk), its ratio
to the copy, the ratio of 1 to N workers, the median CPU seconds (user + system: on a shared
machine less disturbed by other processes than wall time), and peak RSS (ru_maxrss).
`sync OUT` syncs the copy's file alone, not every file system (which would add other
processes' writes to the copy's time). The model's shards stay in the page cache unless
`--cold` evicts them before each run (posix_fadvise DONTNEED on the shards only: dropping the
whole cache would slow every other process on the machine).

    python benchmarks/bench_copy_limit.py --model DIR --scratch DIR --repeat 3 --workers 1,2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

MIB = 1 << 20

RECIPES = ("cast:float16", "fuse-qkv+cast:float16")
COPY = "cat + sync"


def shards_of(model: Path) -> list[Path]:
    """The safetensors files of a model folder, in name order."""
    shards = sorted(model.glob("*.safetensors"))
    if not shards:
        raise SystemExit(f"{model}: expected *.safetensors files in the model folder")
    return shards


def evict(files: Sequence[Path]) -> None:
    """Drop the clean cached pages of `files`, so the next reader reads them from disk."""
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def copy_command(shards: Sequence[Path], out: Path) -> list[str]:
    """The copy limit: concatenate the shards into one file and sync it."""
    quoted = " ".join(f"'{shard}'" for shard in shards)
    return ["sh", "-c", f"cat {quoted} > '{out}' && sync '{out}'"]


def convert_command(model: Path, out: Path, recipe: str, workers: int) -> list[str]:
    """`lazyparams convert RECIPE` with `workers`, no progress bars."""
    command = [sys.executable, "-m", "lazyparams", "convert", recipe, str(model), str(out)]
    return [*command, "--no-progress", "--workers", str(workers)]


def timed(command: list[str]) -> tuple[float, int, int, float]:
    """(wall seconds, peak RSS bytes, exit code, CPU seconds) of `command` in a fresh
    process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss * 1024, process.returncode, cpu


def label_of(recipe: str, workers: int, tree: str = "") -> str:
    """The row of a conversion: recipe, workers, and the source tree when not the installed."""
    return f"{tree}{recipe}, {workers} worker{'s' if workers > 1 else ''}"


def contenders(args: argparse.Namespace, shards: list[Path]) -> list[tuple[str, list[str]]]:
    """(label, command) of every run of one repetition, the copy first; with `--baseline-tree`,
    each conversion also runs from that source tree (before/after in one run)."""
    out = args.scratch / "out.safetensors"
    runs = [(COPY, copy_command(shards, args.scratch / "copy.bin"))]
    trees = [("", [])]
    if args.baseline_tree is not None:
        # PYTHONSAFEPATH: the working folder must not come before the tree on sys.path
        env = ["env", "PYTHONSAFEPATH=1", f"PYTHONPATH={args.baseline_tree}"]
        trees.append(("baseline: ", env))
    for recipe in args.recipes:
        for workers in args.workers:
            for tree, prefix in trees:
                command = prefix + convert_command(args.model, out, recipe, workers)
                runs.append((label_of(recipe, workers, tree), command))
    return runs


def clean(scratch: Path) -> None:
    """Delete every output of a run (the scratch folder itself stays)."""
    for entry in scratch.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


Run = tuple[float, int, float]
"""(wall seconds, peak RSS bytes, CPU seconds) of one run."""


def measure(args: argparse.Namespace) -> dict[str, list[Run]]:
    """Every contender's runs, one per repetition in repetition order."""
    shards = shards_of(args.model)
    runs = contenders(args, shards)
    results: dict[str, list[Run]] = {label: [] for label, _ in runs}
    for repetition in range(args.repeat):
        turn = repetition % len(runs)
        for label, command in runs[turn:] + runs[:turn]:
            if args.cold:
                evict(shards)
            wall, rss, code, cpu = timed(command)
            clean(args.scratch)
            if code != 0:
                raise SystemExit(f"{label}: exit {code}")
            results[label].append((wall, rss, cpu))
            print(f"  {label}: {wall:.2f} s, {cpu:.2f} CPU s, {rss / MIB:.0f} MiB", file=sys.stderr)
    return results


def table(results: dict[str, list[Run]], workers: Sequence[int]) -> str:
    """A markdown table: median and range of wall time, ratio to the copy and to one worker,
    the range of each repetition's ratio to that repetition's copy (runs side by side see the
    same load), median CPU seconds, and the largest peak RSS."""
    medians = {label: statistics.median(w for w, _, _ in runs) for label, runs in results.items()}
    copy, copies = medians[COPY], [w for w, _, _ in results[COPY]]
    lines = [
        "| run | wall s (median) | range | / copy | 1 worker / this | / copy, each repetition "
        "| CPU s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, runs in results.items():
        walls = [w for w, _, _ in runs]
        recipe = label.rsplit(", ", 1)[0]
        one = medians.get(label_of(recipe, workers[0]))
        scaling = f"{one / medians[label]:.2f}" if one and label != COPY else "-"
        each = "-" if label == COPY else _ratios(walls, copies)
        cpu = statistics.median(c for _, _, c in runs)
        # a child's ru_maxrss starts from its parent's at the fork: meaningless for the copy
        rss = "-" if label == COPY else f"{max(r for _, r, _ in runs) / MIB:.0f}"
        lines.append(
            f"| {label} | {medians[label]:.2f} | {min(walls):.2f}-{max(walls):.2f} | "
            f"{medians[label] / copy:.2f} | {scaling} | {each} | {cpu:.2f} | {rss} |"
        )
    return "\n".join(lines)


def _ratios(walls: Sequence[float], copies: Sequence[float]) -> str:
    """Each repetition's wall time over its copy's, joined."""
    return " ".join(f"{w / c:.2f}" for w, c in zip(walls, copies, strict=True))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a safetensors model folder")
    parser.add_argument(
        "--scratch", type=Path, required=True, help="an empty folder for the outputs"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated")
    parser.add_argument("--cold", action="store_true", help="evict the shards before each run")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--baseline-tree", type=Path, help="also run each conversion from this source tree"
    )
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.recipes = args.recipes.split(",")
    return args


def main(argv: Sequence[str] | None = None) -> str:
    """Run the benchmark and print (and optionally save) its table."""
    args = parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    if any(args.scratch.iterdir()):
        raise SystemExit(f"{args.scratch}: expected an empty folder (its files are deleted)")
    text = table(measure(args), args.workers)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return text


if __name__ == "__main__":
    main()
