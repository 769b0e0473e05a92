"""The partition of a plan as tables: totals, balance and the parts with the most work.

What `lazyparams plan --workers-on-cluster N` prints, no cluster needed. Imports rich and the
engine's own modules.
"""

from __future__ import annotations

from rich.table import Table

from lazyparams.engine.partition import Partition
from lazyparams.engine.sizes import format_bytes

SHOWN_PARTS = 16
"""Parts listed one by one (those with the most bytes to move); the rest are counted."""


def partition_table(partition: Partition) -> Table:
    """Totals of the partition: parts, bytes, duplicated reads, peaks, balance."""
    table = Table(title=f"partition for {partition.workers} workers", show_header=False)
    longest = partition.longest_part
    rows = [
        ("spec", partition.spec),
        ("source", partition.source),
        ("parts", f"{len(partition.parts)} of about {format_bytes(partition.part_size)} written"),
        ("read", format_bytes(partition.bytes_in)),
        ("written", format_bytes(partition.bytes_out)),
        ("duplicated reads", format_bytes(partition.duplicated_bytes)),
        ("largest peak", format_bytes(partition.predicted_peak_bytes)),
        (
            "longest part",
            "-"
            if longest is None
            else f"#{longest.index}: {format_bytes(longest.work_bytes)} read and written",
        ),
        ("balance", f"{partition.balance:.2f} (longest part / mean part)"),
    ]
    if partition.budget is not None:
        verdict = "fits" if partition.predicted_peak_bytes <= partition.budget else "EXCEEDED"
        rows.append(("budget per worker", f"{format_bytes(partition.budget)}: {verdict}"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def parts_table(partition: Partition) -> Table:
    """The parts with the most bytes to move, one row each."""
    table = Table(title="parts (most work first)")
    for column in ("part", "outputs", "first output", "read", "written", "predicted peak"):
        table.add_column(column)
    ranked = sorted(partition.parts, key=lambda part: -part.work_bytes)
    for part in ranked[:SHOWN_PARTS]:
        table.add_row(
            str(part.index),
            str(len(part.outputs)),
            part.outputs[0].name,
            format_bytes(part.bytes_in),
            format_bytes(part.bytes_out),
            format_bytes(part.predicted_peak_bytes),
        )
    if len(ranked) > SHOWN_PARTS:
        table.caption = f"and {len(ranked) - SHOWN_PARTS} more parts"
    return table


__all__ = ["partition_table", "parts_table"]
