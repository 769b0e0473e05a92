"""Progress and report of a cluster run: one bar over all parts, then a line per worker.

The bar counts the bytes of the parts done (read and written), with the time remaining; at the
end each worker's line says how many parts it ran, the bytes it read and wrote, and the peak
RSS it saw against its budget. Imports the engine and rich.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from lazyparams.cluster.connect import Workers
from lazyparams.cluster.worker import PartResult
from lazyparams.engine.partition import Part, Partition
from lazyparams.engine.sizes import format_bytes


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What one worker did: parts, bytes, and its largest peaks against its budget."""

    worker: str
    parts: int
    bytes_read: int
    bytes_written: int
    measured_peak_bytes: int
    peak_rss_bytes: int | None
    budget: int | None

    def line(self) -> str:
        """The worker's report line."""
        rss = "n/a" if self.peak_rss_bytes is None else format_bytes(self.peak_rss_bytes)
        budget = "no budget" if self.budget is None else f"budget {format_bytes(self.budget)}"
        return (
            f"{self.worker}: {self.parts} parts, read {format_bytes(self.bytes_read)}, wrote "
            f"{format_bytes(self.bytes_written)}, peak RSS {rss} (VM "
            f"{format_bytes(self.measured_peak_bytes)}), {budget}"
        )


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """What a cluster conversion did; after a resume, `parts_run` counts only the missing.

    `destination` and `files` name the output as `convert`'s own report does; the bytes read and
    written and the measured peak are the sums and the largest of `workers`' reports.
    """

    partition: Partition
    destination: str
    files: tuple[str, ...]
    parts_run: int
    resumed_outputs: int
    wall_seconds: float
    workers: tuple[WorkerReport, ...]

    @property
    def predicted_peak_bytes(self) -> int:
        """The largest part's predicted peak (what each worker needs at least)."""
        return self.partition.predicted_peak_bytes

    @property
    def measured_peak_bytes(self) -> int:
        """The largest peak the VM measured on any worker."""
        return max((w.measured_peak_bytes for w in self.workers), default=0)

    @property
    def bytes_read(self) -> int:
        """Bytes the parts read, a part run twice counted once."""
        return sum(w.bytes_read for w in self.workers)

    @property
    def bytes_written(self) -> int:
        """Bytes the parts wrote."""
        return sum(w.bytes_written for w in self.workers)

    def summary(self) -> dict[str, Any]:
        """The report as plain data (for JSON)."""
        return {
            **self.partition.summary(),
            "destination": self.destination,
            "files": list(self.files),
            "parts_run": self.parts_run,
            "resumed_outputs": self.resumed_outputs,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "wall_seconds": self.wall_seconds,
            "measured_peak_bytes": self.measured_peak_bytes,
            "worker_reports": [w.line() for w in self.workers],
        }


def worker_reports(
    results: Sequence[PartResult], workers: Workers, budget: int | None
) -> tuple[WorkerReport, ...]:
    """One report per worker that ran parts, from the parts' results."""
    by_worker: dict[str, list[PartResult]] = {}
    for result in results:
        by_worker.setdefault(result.worker, []).append(result)
    reports = []
    for worker, done in sorted(by_worker.items()):
        rss = [r.stats.peak_rss_bytes for r in done if r.stats.peak_rss_bytes is not None]
        declared = workers.budgets.get(worker)
        reports.append(
            WorkerReport(
                worker=worker,
                parts=len(done),
                bytes_read=sum(r.stats.bytes_read for r in done),
                bytes_written=sum(r.stats.bytes_written for r in done),
                measured_peak_bytes=max(r.stats.measured_peak_bytes for r in done),
                peak_rss_bytes=max(rss) if rss else None,
                budget=declared if declared is not None else budget,
            )
        )
    return tuple(reports)


class ClusterBars:
    """One bar over the bytes of all parts (read and written), drawn on stderr."""

    def __init__(self, parts: Sequence[Part], *, enabled: bool) -> None:
        self.enabled, self.total, self.done = enabled, len(parts), 0
        self._console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TimeRemainingColumn(),
            console=self._console,
        )
        work = sum(part.work_bytes for part in parts)
        self._task = self._progress.add_task(self._label(), total=work)

    def _label(self) -> str:
        return f"parts {self.done}/{self.total}"

    def part_done(self, part: Part) -> None:
        """Count one finished part."""
        self.done += 1
        self._progress.update(self._task, advance=part.work_bytes, description=self._label())

    def print_workers(self, reports: Sequence[WorkerReport]) -> None:
        """The per-worker lines, after the bar."""
        if self.enabled:
            for report in reports:
                self._console.print(report.line(), highlight=False)

    def __enter__(self) -> ClusterBars:
        if self.enabled:
            self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.enabled:
            self._progress.stop()


__all__ = ["ClusterBars", "ClusterReport", "WorkerReport", "worker_reports"]
