"""Benchmark: the partitioned plan of a 671B checkpoint for 8, 64 and 256 workers, without data.

The checkpoint is DeepSeek-V3's published layout with real headers and sparse data
(`deepseek_headers`), so nothing is read and nothing takes disk space. The transform stacks
each MoE layer's experts (`stack_experts.py`), so a part must hold a whole layer's experts.
Prints a markdown table (parts, bytes, duplicated reads, largest predicted peak, longest part,
balance = longest / mean, seconds to partition) and writes it to
`benchmarks/results/partition_671b.md`.

    python -m benchmarks.bench_partition --workers 8 64 256
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Hashable, Sequence
from pathlib import Path

from benchmarks.deepseek_headers import LAYERS, make_header_only
from lazyparams.engine import format_bytes
from lazyparams.engine.compile import trace_transform
from lazyparams.engine.partition import Partition, Template, build_partition
from lazyparams.engine.recipes import load_spec
from lazyparams.io import open_source

SPEC = Path(__file__).with_name("stack_experts.py")
RESULTS = Path(__file__).with_name("results") / "partition_671b.md"


def partition_rows(
    root: Path, workers: Sequence[int]
) -> tuple[float, list[tuple[int, Partition, float]]]:
    """Trace once, then partition for each worker count; seconds to trace, and each result."""
    with open_source(root) as source:
        started = time.perf_counter()
        traced = trace_transform(load_spec(str(SPEC)), source)
        traced_in = time.perf_counter() - started
        compiled: dict[Hashable, Template] = {}
        rows = []
        for count in workers:
            started = time.perf_counter()
            plan = build_partition(traced, source, spec=SPEC.name, workers=count, compiled=compiled)
            rows.append((count, plan, time.perf_counter() - started))
    return traced_in, rows


def table(
    tensors: int, source_bytes: int, traced_in: float, rows: Sequence[tuple[int, Partition, float]]
) -> str:
    """The markdown table of the partitions."""
    lines = [
        f"Header-only DeepSeek-V3 layout: {tensors} tensors, {format_bytes(source_bytes)}; "
        f"traced in {traced_in:.1f} s (once for all rows).",
        "",
        "| workers | parts | part size | read | written | duplicated reads | largest peak "
        "| longest part | balance (longest / mean) | partition s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for count, plan, seconds in rows:
        longest = plan.longest_part
        assert longest is not None
        lines.append(
            f"| {count} | {len(plan.parts)} | {format_bytes(plan.part_size)} "
            f"| {format_bytes(plan.bytes_in)} | {format_bytes(plan.bytes_out)} "
            f"| {format_bytes(plan.duplicated_bytes)} | {format_bytes(plan.predicted_peak_bytes)} "
            f"| #{longest.index}: {format_bytes(longest.work_bytes)} | {plan.balance:.2f} "
            f"| {seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Make the header-only checkpoint, partition it, print and save the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--layers", type=int, default=LAYERS + 1, help="decoder layers to keep")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = make_header_only(Path(folder) / "deepseek-v3", args.layers)
        with open_source(root) as source:
            names = source.names()
            total = sum(source.info(name).nbytes for name in names)
        traced_in, rows = partition_rows(root, args.workers)
    text = table(len(names), total, traced_in, rows)
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
