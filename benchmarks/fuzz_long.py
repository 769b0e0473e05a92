"""The long fuzz run: every source format, rounds of seeded cases until the time is spent.

Prints, per round and at the end, the cases run per format with their outcomes, the time per
case, and every distinct finding (format, class, exception, last line, reproducer). The CI
test (tests/fuzz/test_fuzz.py) runs the same campaign with a few hundred cases per format.

    PYTHONPATH=. python benchmarks/fuzz_long.py --minutes 30 --findings /tmp/fuzz-findings
    PYTHONPATH=. python benchmarks/fuzz_long.py --replay /tmp/fuzz-findings/000-npz-...
    PYTHONPATH=. python benchmarks/fuzz_long.py --recheck /tmp/fuzz-findings --markdown now.md
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
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


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="stop after this long")
    parser.add_argument("--round", type=int, default=500, help="cases per format per round")
    parser.add_argument("--seed", type=int, default=1)
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


def main() -> None:
    args = _arguments()
    if args.replay:
        replay(args.replay)
        return
    if args.recheck:
        print_recheck(args.recheck, args)
        return
    formats = tuple(args.formats.split(","))
    total, stop, first = Report(), time.monotonic() + 60 * args.minutes, 0
    while time.monotonic() < stop:
        report = run_campaign(
            args.round,
            seed=args.seed,
            formats=formats,
            workers=args.workers,
            timeout=args.timeout,
            memory=args.memory,
            first=first,
            reference=not args.no_reference,
        )
        total.merge(report)
        first += args.round
        print(f"round to case {first} of each format: {report.text()}\n", flush=True)
    if args.findings:
        write_reproducers(total, args.findings)
    print(f"TOTAL (seed {args.seed}, {first} cases of each format):\n{total.text()}")
    if args.markdown:
        args.markdown.write_text(total.markdown() + "\n")


if __name__ == "__main__":
    main()
