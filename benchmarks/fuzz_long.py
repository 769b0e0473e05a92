"""The long fuzz run: seeded cases of every source format, a fixed count or until time is up.

Prints, per round and at the end, the cases run per format with their outcomes, the time per
case, and every distinct finding (format, class, exception, last line, reproducer), and exits
with status 1 when there was any. The test suite (tests/fuzz/test_fuzz.py) runs one seed with a
few hundred cases per format; CI's fuzz step (.ci/fuzz) runs `--cases N` of every seed in SEEDS,
a fixed and repeatable set of cases.

SEEDS grows: each release adds new seeds to it (and keeps the old ones), so every release's CI
explores cases no earlier one ran, while a seed that once found a fault keeps guarding its fix.
Every finding is fixed in the reader and its reproducer checked in under tests/fuzz/reproducers,
where tests/fuzz/test_reproducers.py replays it.

    PYTHONPATH=. python benchmarks/fuzz_long.py --cases 300 --findings /tmp/fuzz-findings
    PYTHONPATH=. python benchmarks/fuzz_long.py --minutes 30 --seeds 7,8 --findings /tmp/ff
    PYTHONPATH=. python benchmarks/fuzz_long.py --replay /tmp/fuzz-findings/000-npz-...
    PYTHONPATH=. python benchmarks/fuzz_long.py --recheck /tmp/fuzz-findings --markdown now.md
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.campaign import (
    GOOD,
    Report,
    read_reproducer,
    recheck,
    run_campaign,
    write_reproducers,
)
from tests.fuzz.seeds import FORMATS
from tests.fuzz.worker import exercise

SEEDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 101]
"""The campaign seeds CI runs (`.ci/fuzz`); each release appends new ones and drops none."""


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="stop after this long")
    parser.add_argument(
        "--cases", type=int, help="run exactly this many cases per format of each seed instead"
    )
    parser.add_argument("--round", type=int, default=500, help="cases per format per round")
    parser.add_argument(
        "--seeds",
        type=lambda text: [int(seed) for seed in text.split(",")],
        default=SEEDS,
        help="comma-separated campaign seeds (default: SEEDS)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per case")
    parser.add_argument("--memory", type=int, default=1 << 30, help="bytes per worker")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--findings", type=Path, help="folder for the reproducers")
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="do not compare accepted files with the safetensors library and numpy",
    )
    parser.add_argument("--markdown", type=Path, help="write the counts and findings table here")
    parser.add_argument("--replay", type=Path, help="rerun one reproducer here, in-process")
    parser.add_argument(
        "--recheck", type=Path, help="rerun every reproducer in this folder and say what changed"
    )
    return parser.parse_args(argv)


def replay(folder: Path) -> None:
    """Run a reproducer's case in this process (no limits), printing its traceback if any."""
    meta, request = read_reproducer(folder)
    case = request["case"]
    print(f"{meta['format']} case {meta['seed']}:{meta['index']}: {'; '.join(meta['mutations'])}")
    with __import__("tempfile").TemporaryDirectory() as work:
        try:
            print("ok:", exercise(case, Path(work)))
        except Exception:
            traceback.print_exc()


def print_recheck(folder: Path, args: argparse.Namespace) -> None:
    """For every reproducer under `folder`: its recorded class and what it does now."""
    folders = sorted(p.parent for p in folder.glob("*/case.json"))
    rows = ["| reproducer | format | was | now | now's last line |", "|---|---|---|---|---|"]
    for path, meta, reply in recheck(folders, args.workers, args.timeout, args.memory):
        now = reply["outcome"] + (f" {reply['type']}" if reply["outcome"] not in GOOD else "")
        last = reply.get("last_line", "").replace("|", "\\|")[:140]
        was = f"{meta['outcome']} {meta['type']}"
        rows.append(f"| {path.name} | {meta['format']} | {was} | {now} | {last} |")
    text = "\n".join(rows)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")


def _rounds(args: argparse.Namespace) -> Iterator[tuple[int, int, int]]:
    """(seed, first case, cases per format) of each round: the seeds in turn, `--cases` of
    each, or rounds of `--round` cases until `--minutes` are spent."""
    if args.cases is not None:
        for seed in args.seeds:
            for first in range(0, args.cases, args.round):
                yield seed, first, min(args.round, args.cases - first)
        return
    stop, first = time.monotonic() + 60 * args.minutes, 0
    while time.monotonic() < stop:
        for seed in args.seeds:
            if time.monotonic() >= stop:
                return
            yield seed, first, args.round
        first += args.round


def main() -> None:
    args = _arguments()
    if args.replay:
        replay(args.replay)
        return
    if args.recheck:
        print_recheck(args.recheck, args)
        return
    formats = tuple(args.formats.split(","))
    total, cases = Report(), dict.fromkeys(args.seeds, 0)
    for seed, first, count in _rounds(args):
        report = run_campaign(
            count,
            seed=seed,
            formats=formats,
            workers=args.workers,
            timeout=args.timeout,
            memory=args.memory,
            first=first,
            reference=not args.no_reference,
        )
        total.merge(report)
        cases[seed] = first + count
        print(
            f"seed {seed}, cases {first} to {first + count} of each format: {report.text()}\n",
            flush=True,
        )
    if args.findings:
        write_reproducers(total, args.findings)
    shown = ", ".join(f"{seed}: {count}" for seed, count in cases.items())
    print(f"TOTAL (cases of each format per seed: {shown}):\n{total.text()}", flush=True)
    if args.markdown:
        args.markdown.write_text(total.markdown() + "\n")
    if total.findings:
        sys.exit(1)


if __name__ == "__main__":
    main()
