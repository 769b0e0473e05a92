"""A plan, a conversion's report and the demo's memory figures as two-column tables.

What `lazyparams plan`, `convert` and `demo` print. Imports rich, and the engine's own modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from lazyparams.engine.sizes import format_bytes

if TYPE_CHECKING:  # the tables read a plan or report; importing convert would load the runtime
    from lazyparams.engine.convert import Report
    from lazyparams.engine.plan import Plan


def _table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    table = Table(title=Text(title), show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(Text(label), Text(value))
    return table


def _count(number: int, noun: str) -> str:
    """`1 tensor`, `3 tensors`: a count with its noun in the right number."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _peak(nbytes: int, the_plan: Plan) -> str:
    """The peak and where it happens: the binding and the tensor it belongs to."""
    return f"{format_bytes(nbytes)} at binding {the_plan.binding_label(the_plan.peak_binding)}"


def plan_table(the_plan: Plan) -> Table:
    """The plan as a two-column table."""
    ratio = the_plan.eager_peak_bytes / max(the_plan.predicted_peak_bytes, 1)
    rows = [
        ("source", f"{the_plan.source} ({_count(the_plan.source_tensors, 'tensor')})"),
        *the_plan.target,
        ("reads", f"{_count(len(the_plan.inputs), 'tensor')}, {format_bytes(the_plan.bytes_in)}"),
        (
            "writes",
            f"{_count(len(the_plan.outputs), 'tensor')}, {format_bytes(the_plan.bytes_out)}",
        ),
        ("eager peak", f"{format_bytes(the_plan.eager_peak_bytes)} (everything in memory)"),
        (
            "predicted peak",
            f"{_peak(the_plan.predicted_peak_bytes, the_plan)} ({ratio:.1f}x less)",
        ),
    ]
    if the_plan.workers > 1:
        rows.append(
            (
                "workers",
                f"{the_plan.workers}, within {format_bytes(the_plan.predicted_peak_bytes)} "
                f"({format_bytes(the_plan.in_flight_bytes)} above the in-order peak)",
            )
        )
    budget = _budget(the_plan)
    if budget is not None:
        rows.append(("budget", budget))
    return _table(f"Plan: {the_plan.spec}", rows)


def _budget(the_plan: Plan) -> str | None:
    """The budget, where it comes from when not given, and whether the plan fits it."""
    choice = the_plan.budget_choice
    origin = "given" if choice is None else choice.origin
    if the_plan.budget is None:
        return None if choice is None else f"none ({choice.note})"
    verdict = "fits" if the_plan.fits else "does NOT fit"
    source = "" if origin == "given" or choice is None else f" ({origin}: {choice.note})"
    return f"{format_bytes(the_plan.budget)}{source}: {verdict}"


def report_table(report: Report) -> Table:
    """The report of a conversion as a two-column table."""
    rows = [
        ("destination", f"{report.destination} ({_count(len(report.files), 'file')})"),
        ("read", f"{_count(report.tensors_read, 'tensor')}, {format_bytes(report.bytes_read)}"),
        (
            "written",
            f"{_count(report.tensors_written, 'tensor')}, {format_bytes(report.bytes_written)}",
        ),
    ]
    if report.resumed_outputs:
        rows.append(("resumed", f"{_count(report.resumed_outputs, 'output')} already written"))
    if report.discarded_partial:
        rows.append(("note", "an interrupted run's partial output was discarded"))
    rows.append(("time", f"{report.wall_seconds:.2f} s"))
    return _table(f"Converted: {report.plan.spec}", rows + _memory_rows(report))


def _memory_rows(report: Report) -> list[tuple[str, str]]:
    def bytes_or_na(value: int | None) -> str:
        return "n/a" if value is None else format_bytes(value)

    return [
        ("eager peak", format_bytes(report.eager_peak_bytes)),
        (
            "predicted peak",
            _peak(report.predicted_peak_bytes, report.plan),
        ),
        ("measured peak (VM)", bytes_or_na(report.measured_peak_bytes)),
        ("peak RSS over start", bytes_or_na(report.peak_rss_bytes)),
    ]


def memory_table(report: Report, source_bytes: int) -> Table:
    """Predicted and measured memory next to the eager figure, for the demo."""
    rows = [("checkpoint", format_bytes(source_bytes)), *_memory_rows(report)]
    rows.append(("time", f"{report.wall_seconds:.2f} s"))
    return _table("Memory: eager vs lazy", rows)
