"""Benchmark: how long the `lazyparams` command takes to answer, next to a bare interpreter.

Each command runs N times in a fresh interpreter, as the console script runs it, after one
warm-up run, so byte code is cached as an installed package has it (the 671B plan reuses the
plans' warm-up). The floor is `python -c pass`. Commands: `--version`, `--help`, `plan` of a
1B-class checkpoint with `cast:float16` and with `gguf`, and the partitioned plan of the
header-only 671B DeepSeek-V3 layout for 64 workers (`deepseek_headers`, no data read). Prints
a markdown table of medians (wall and CPU seconds, CPU being the child's user + system time,
which a busy machine disturbs less) with ratios to the floor, and writes it to
`benchmarks/results/startup.md`. With `--baseline OLDER_CHECKOUT` every command also runs
against that checkout, alternating with this one, and the table sets both side by side.

    python -m benchmarks.bench_startup --model PATH/TO/llama-1b --runs 7 --baseline OLDER
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.deepseek_headers import make_header_only

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).with_name("results") / "startup.md"
SPEC_671B = Path(__file__).with_name("stack_experts.py")
# what the console script runs
CONSOLE_SCRIPT = "import sys; from lazyparams.cli import main; sys.exit(main())"


def _env(root: Path) -> dict[str, str]:
    """Checkout `root` first on the path, byte code written and read as an installation does."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(argv: Sequence[str], root: Path) -> tuple[float, float]:
    """Wall seconds and child CPU seconds (user + system) of one run of `argv` with the
    project at `root`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # run in `root`: `python -c` puts the working folder first on the path
    done = subprocess.run(
        argv, cwd=root, env=_env(root), capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def medians(argv: Sequence[str], runs: int, root: Path, warm_up: bool) -> tuple[float, float]:
    """Median wall and CPU seconds of `runs` runs of `argv`, after a warm-up run if asked."""
    return medians_side_by_side(argv, runs, [root], warm_up)[0]


def medians_side_by_side(
    argv: Sequence[str], runs: int, roots: Sequence[Path], warm_up: bool
) -> list[tuple[float, float]]:
    """`medians` for each checkout in `roots`, their runs alternating so that a change in the
    machine's load falls on all of them alike."""
    if warm_up:
        for root in roots:
            run_once(argv, root)
    samples: list[list[tuple[float, float]]] = [[] for _ in roots]
    for _ in range(runs):
        for found, root in zip(samples, roots, strict=True):
            found.append(run_once(argv, root))
    return [
        (statistics.median(s[0] for s in found), statistics.median(s[1] for s in found))
        for found in samples
    ]


def commands(model: Path | None, deepseek: Path | None) -> list[tuple[str, list[str]]]:
    """The command lines to time, labelled; the floor first."""
    cli = [sys.executable, "-c", CONSOLE_SCRIPT]
    rows = [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"]),
        ("lazyparams --version", [*cli, "--version"]),
        ("lazyparams --help", [*cli, "--help"]),
    ]
    if model is not None:
        for spec in ("cast:float16", "gguf"):
            rows.append((f"lazyparams plan {spec} {model.name}", [*cli, "plan", spec, str(model)]))
    if deepseek is not None:
        argv = [*cli, "plan", str(SPEC_671B), str(deepseek), "--workers-on-cluster", "64"]
        rows.append(("lazyparams plan (671B, --workers-on-cluster 64)", argv))
    return rows


def table(results: Sequence[tuple[str, float, float]], runs: int, big_runs: int) -> str:
    """The markdown table: medians and ratios to the floor (the first row)."""
    _, floor_wall, floor_cpu = results[0]
    lines = [
        f"Medians of {runs} runs ({big_runs} for the 671B plan), each in a fresh interpreter "
        f"after a warm-up run; {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| command | wall s | wall ÷ floor | CPU s | CPU ÷ floor | CPU over floor s |",
        "|---|---|---|---|---|---|",
    ]
    for label, wall, cpu in results:
        lines.append(
            f"| {label} | {wall:.3f} | {wall / floor_wall:.2f} | {cpu:.3f} "
            f"| {cpu / floor_cpu:.2f} | {cpu - floor_cpu:.3f} |"
        )
    return "\n".join(lines) + "\n"


def side_by_side_table(
    results: Sequence[tuple[str, tuple[float, float], tuple[float, float]]],
    runs: int,
    big_runs: int,
) -> str:
    """The markdown table of (label, baseline medians, these medians) rows, floor first."""
    _, _, (_, floor_cpu) = results[0]
    lines = [
        f"Medians of {runs} runs ({big_runs} for the 671B plan) of each checkout, alternating, "
        f"each in a fresh interpreter after a warm-up run; {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| command | before CPU s | after CPU s | after ÷ before | before wall s | after wall s "
        "| after CPU ÷ floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, (old_wall, old_cpu), (wall, cpu) in results:
        lines.append(
            f"| {label} | {old_cpu:.3f} | {cpu:.3f} | {cpu / old_cpu:.2f} | {old_wall:.3f} "
            f"| {wall:.3f} | {cpu / floor_cpu:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Time every command, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a 1B-class Hugging Face model folder")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--big-runs", type=int, default=1, help="runs of the 671B plan")
    parser.add_argument("--no-671b", action="store_true", help="skip the 671B plan")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the project checkout to time (default: this one)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="an older checkout to time alongside, for before / after"
    )
    args = parser.parse_args(argv)
    if args.model is None:
        print("no --model given: the 1B plan rows are skipped", file=sys.stderr)
    roots = [args.root] if args.baseline is None else [args.baseline, args.root]
    with tempfile.TemporaryDirectory() as folder:
        deepseek = None if args.no_671b else make_header_only(Path(folder) / "deepseek-v3")
        results: list[tuple[str, list[tuple[float, float]]]] = []
        for label, command in commands(args.model, deepseek):
            big = "671B" in label  # its modules are those of the plans before it: no warm-up
            runs = args.big_runs if big else args.runs
            found = medians_side_by_side(command, runs, roots, warm_up=not big)
            results.append((label, found))
            shown = ", ".join(f"{wall:.3f} s wall, {cpu:.3f} s CPU" for wall, cpu in found)
            print(f"{label}: {shown}", flush=True)
    if args.baseline is None:
        text = table([(label, *found[0]) for label, found in results], args.runs, args.big_runs)
    else:
        pairs = [(label, found[0], found[1]) for label, found in results]
        text = side_by_side_table(pairs, args.runs, args.big_runs)
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
