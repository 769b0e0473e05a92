"""1 worker against N on the same conversion, with where each thread's time went.

On a machine shared with other work the wall-time ratio of 1 to N workers mixes two things:
what the program itself makes its threads wait for (locks, the GIL, the disk) and how much CPU
the other processes leave it. Each run is `lazyparams.convert` in a fresh process whose threads
report, from Linux's /proc/thread-self/schedstat, their time on a CPU and their time runnable
but waiting for one (the machine's other load); the rest of a thread's life it was blocked.
Runs alternate (1, N, 1, N, ...). Reported per worker count: the median wall time, the 1-worker
/ N-worker ratio of each pair of runs side by side (their median and spread), and, summed over
the threads that run bindings, seconds on a CPU, waiting for a CPU and blocked. Linux only.

    python benchmarks/bench_workers.py --model DIR --scratch DIR --recipe gguf:q8_0 --repeat 5
"""

from __future__ import annotations

import argparse
import json
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
recipe, src, dst, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
start = sched()
lazyparams.convert(recipe, src, dst, workers=workers, progress=False)
keep("MainThread", start)
print(json.dumps(threads))
"""

WORKER_THREADS = ("MainThread", "lazyparams-worker-")
"""The threads that run bindings (the main thread among them); the others sync files."""


def run_once(recipe: str, model: Path, out: Path, workers: int) -> dict[str, float]:
    """One conversion in a fresh process: wall seconds, and the binding threads' seconds on a
    CPU, waiting for one and blocked (summed), and the other threads' seconds blocked."""
    command = [sys.executable, "-c", CHILD, recipe, str(model), str(out), str(workers)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{recipe}, {workers} workers: exit {done.returncode}\n{done.stderr}")
    threads = json.loads(done.stdout.strip().splitlines()[-1])
    result = {"wall": 0.0, "cpu": 0.0, "runq": 0.0, "blocked": 0.0, "other_blocked": 0.0}
    for name, wall, cpu, runq in threads:
        if name == "MainThread":
            result["wall"] = wall
        if name.startswith(WORKER_THREADS):
            result["cpu"] += cpu
            result["runq"] += runq
            result["blocked"] += wall - cpu - runq
        else:
            result["other_blocked"] += wall - cpu - runq
    return result


def remove(path: Path) -> None:
    """Delete an output (a file or a folder) if it is there."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def measure(args: argparse.Namespace) -> dict[int, list[dict[str, float]]]:
    """Every run of every worker count, alternating, `args.repeat` times."""
    results: dict[int, list[dict[str, float]]] = {w: [] for w in args.workers}
    out = args.scratch / f"out{args.suffix}"
    for repetition in range(args.repeat):
        order = args.workers if repetition % 2 == 0 else args.workers[::-1]
        for workers in order:
            remove(out)
            run = run_once(args.recipe, args.model, out, workers)
            remove(out)
            results[workers].append(run)
            figures = ", ".join(f"{key} {value:.2f}" for key, value in run.items())
            print(f"  {workers} worker(s): {figures}", file=sys.stderr)
    return results


def table(results: dict[int, list[dict[str, float]]], recipe: str) -> str:
    """Markdown: per worker count, median wall, the paired 1/N ratios, and the time split."""
    lines = [
        f"{recipe}: seconds, medians; binding threads summed",
        "",
        "| workers | wall s | 1 worker / this (median, range) | on CPU | waiting for a CPU "
        "| blocked | sync thread blocked |",
        "|---|---|---|---|---|---|---|",
    ]
    one = results[min(results)]
    for workers, runs in results.items():
        ratios = [a["wall"] / b["wall"] for a, b in zip(one, runs, strict=True)]
        ratio = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        cells = [statistics.median(run[key] for run in runs) for key in run_keys()]
        lines.append(
            f"| {workers} | {cells[0]:.2f} | {ratio} | "
            + " | ".join(f"{c:.2f}" for c in cells[1:])
            + " |"
        )
    return "\n".join(lines)


def run_keys() -> tuple[str, ...]:
    return ("wall", "cpu", "runq", "blocked", "other_blocked")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="a model folder or file")
    parser.add_argument("--scratch", type=Path, required=True, help="a folder for the output")
    parser.add_argument("--recipe", default="gguf:q8_0", help="a recipe, as for the CLI")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
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
