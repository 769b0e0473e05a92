"""1 worker against N on the same conversion, with where each thread's time went.

On a machine shared with other work the wall-time ratio of 1 to N workers mixes two things:
what the program itself makes its threads wait for (locks, the GIL, the disk) and how much CPU
the other processes leave it. Each run is `lazyparams.convert` in a fresh process whose threads
report, from Linux's /proc/thread-self/schedstat, their time on a CPU and their time runnable
but waiting for one (the machine's other load); the rest of a thread's life it was blocked.
Runs alternate (1, N, N, 1, ...). Reported per worker count: the median wall time, the 1-worker
/ N-worker ratio of each pair of runs side by side (their median and spread), and, summed over
the threads that run bindings, seconds on a CPU, waiting for a CPU and blocked; and the main
thread's wall time less its own waits for a CPU, what the run would take on CPUs of its own
(roughly: a wait of another thread for a CPU still shows as the main thread blocked). With
`--baseline-tree`, each run is repeated from that source tree (before/after in one run). Linux
only.

    python benchmarks/bench_workers.py --model DIR --scratch DIR --recipe gguf:q8_0 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

CHILD = r"""
import json, sys, threading, time
from pathlib import Path

def sched():
    with open("/proc/thread-self/schedstat") as f:
        on_cpu, waiting = f.read().split()[:2]
    return time.perf_counter(), int(on_cpu) / 1e9, int(waiting) / 1e9

threads = []
lock = threading.Lock()

def keep(name, start):
    end = sched()
    with lock:
        threads.append([name] + [b - a for a, b in zip(start, end)])

run = threading.Thread.run
def timed_run(self):
    start = sched()
    try:
        run(self)
    finally:
        keep(self.name, start)
threading.Thread.run = timed_run

import lazyparams
from lazyparams.engine.process import tune_process_for_conversion
recipe, src, dst, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = sched()
with tune_process_for_conversion():  # as the command runs it
    lazyparams.convert(recipe, src, dst, workers=workers, progress=False)
keep("MainThread", start)
print(json.dumps(threads))
"""

WORKER_THREADS = ("MainThread", "lazyparams-worker-")
"""The threads that run bindings (the main thread among them); the others sync files."""


def run_once(
    recipe: str, model: Path, out: Path, workers: int, tree: Path | None = None
) -> dict[str, float]:
    """One conversion in a fresh process (importing lazyparams from `tree` when given): wall
    seconds, and the binding threads' seconds on a CPU, waiting for one and blocked (summed)."""
    command = [sys.executable, "-c", CHILD, recipe, str(model), str(out), str(workers)]
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        what = f"{recipe} with {workers} worker(s)"
        raise SystemExit(f"{what}: exit {done.returncode}\n{done.stderr}")
    threads = json.loads(done.stdout.strip().splitlines()[-1])
    result = dict.fromkeys(run_keys(), 0.0)
    for name, wall, cpu, runq in threads:
        if name == "MainThread":
            result["wall"], result["unloaded"] = wall, wall - runq
        if name.startswith(WORKER_THREADS):  # the sync thread idles between jobs: left out
            result["cpu"] += cpu
            result["runq"] += runq
            result["blocked"] += wall - cpu - runq
    return result


def remove(path: Path) -> None:
    """Delete an output (a file or a folder) if it is there."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


Results = dict[tuple[str, int], list[dict[str, float]]]


def measure(args: argparse.Namespace) -> Results:
    """Every run of every tree and worker count, alternating, `args.repeat` times."""
    trees: list[tuple[str, Path | None]] = [("", None)]
    if args.baseline_tree is not None:
        trees.append(("baseline", args.baseline_tree))
    runs = [(label, tree, w) for label, tree in trees for w in args.workers]
    results: Results = {(label, w): [] for label, _, w in runs}
    out = args.scratch / f"out{args.suffix}"
    for repetition in range(args.repeat):
        for label, tree, workers in runs if repetition % 2 == 0 else runs[::-1]:
            remove(out)
            run = run_once(args.recipe, args.model, out, workers, tree)
            remove(out)
            results[label, workers].append(run)
            figures = ", ".join(f"{key} {value:.2f}" for key, value in run.items())
            print(f"  {label or 'this tree'}, {workers} worker(s): {figures}", file=sys.stderr)
    return results


def table(results: Results, recipe: str) -> str:
    """Markdown: per tree and worker count, the median wall, the paired 1/N ratios, and the
    time split."""
    lines = [
        f"{recipe}: seconds, medians; binding threads summed",
        "",
        "| tree | workers | wall s | 1 worker / this (median, range) | on CPU "
        "| waiting for a CPU | blocked | wall less CPU waits | 1 worker / this |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    fewest = min(workers for _, workers in results)
    for (label, workers), runs in results.items():
        one = results[label, fewest]
        cells = [statistics.median(run[key] for run in runs) for key in run_keys()]
        figures = " | ".join(f"{c:.2f}" for c in cells[1:])
        lines.append(
            f"| {label or 'this'} | {workers} | {cells[0]:.2f} | {_ratios(one, runs, 'wall')} "
            f"| {figures} | {_ratios(one, runs, 'unloaded').split()[0]} |"
        )
    return "\n".join(lines)


def _ratios(one: list[dict[str, float]], runs: list[dict[str, float]], key: str) -> str:
    """The median and range of `key` of each 1-worker run over that of the run beside it."""
    ratios = [a[key] / b[key] for a, b in zip(one, runs, strict=True)]
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def run_keys() -> tuple[str, ...]:
    """The figures of a run: wall seconds, the binding threads' time split, and the main
    thread's wall less its waits for a CPU."""
    return ("wall", "cpu", "runq", "blocked", "unloaded")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a model folder or file")
    parser.add_argument("--scratch", type=Path, required=True, help="a folder for the output")
    parser.add_argument("--recipe", default="gguf:q8_0", help="a recipe, as for the CLI")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--baseline-tree", type=Path, help="also run each conversion from this source tree"
    )
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.suffix = ".gguf" if args.recipe.startswith("gguf") else ".safetensors"
    return args


def main(argv: Sequence[str] | None = None) -> str:
    """Run the benchmark and print (and optionally save) its table."""
    args = parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    text = table(measure(args), args.recipe)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return text


if __name__ == "__main__":
    main()
