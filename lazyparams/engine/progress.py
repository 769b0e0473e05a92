"""Progress of a conversion: bytes read and written, shown as rich progress bars with ETA.

The runner reports each loaded input and each written output to a `Counter`; `Bars` also draws
them, on stderr so that a report on stdout stays clean. Imports rich.
"""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


class Counter:
    """Counts tensors and bytes read and written; the runner reports each one here.

    Used as a context manager around the run; this base shows nothing.
    """

    def __init__(self) -> None:
        self.tensors_read = self.bytes_read = 0
        self.tensors_written = self.bytes_written = 0
        self._lock = threading.Lock()  # writes may report from background threads

    def loaded(self, name: str, nbytes: int, tensors: int = 1) -> None:
        """`nbytes` of `name` were read; `tensors` is 0 for a block after a tensor's first."""
        with self._lock:
            self.tensors_read += tensors
            self.bytes_read += nbytes

    def wrote(self, name: str, nbytes: int, tensors: int = 1) -> None:
        """`nbytes` of `name` were written; `tensors` is 0 for a block before a tensor's last."""
        with self._lock:
            self.tensors_written += tensors
            self.bytes_written += nbytes

    def __enter__(self) -> Counter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        pass


class Bars(Counter):
    """Two rich bars, `read` and `write`, with bytes, speed and time remaining."""

    def __init__(self, bytes_in: int, bytes_out: int, already_written: int = 0) -> None:
        super().__init__()
        self._progress = Progress(
            TextColumn("{task.description:>5}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._read: TaskID = self._progress.add_task("read", total=bytes_in)
        self._write: TaskID = self._progress.add_task(
            "write", total=bytes_out, completed=already_written
        )

    def loaded(self, name: str, nbytes: int, tensors: int = 1) -> None:
        super().loaded(name, nbytes, tensors)
        self._progress.advance(self._read, nbytes)

    def wrote(self, name: str, nbytes: int, tensors: int = 1) -> None:
        super().wrote(name, nbytes, tensors)
        self._progress.advance(self._write, nbytes)

    def __enter__(self) -> Bars:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()
