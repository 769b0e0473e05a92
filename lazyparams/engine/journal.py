"""The work folder of a conversion: its job description, its journal and its lock.

A conversion into DST builds its output in `.<DST name>.lazyparams-partial` beside DST. The
folder holds `job.json` (what is being converted, so a resume can check it is the same job),
`journal` (one line per finished output, appended and fsync'd in batches) and `lock` (held while a
conversion writes). Imports only the standard library and `errors`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError, LazyParamsError, OutputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: conversions are not locked
    fcntl = None  # type: ignore[assignment]

WORK_SUFFIX = ".lazyparams-partial"
JOB_FILE = "job.json"
JOURNAL_FILE = "journal"
LOCK_FILE = "lock"


def work_dir(dst: Path) -> Path:
    """The work folder of a conversion into `dst`."""
    return dst.parent / f".{dst.name}{WORK_SUFFIX}"


def read_job(work: Path) -> dict[str, Any] | None:
    """The job description of a work folder, or None when it has none (or an unreadable one)."""
    try:
        job = json.loads((work / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return job if isinstance(job, dict) else None


def write_job(work: Path, job: dict[str, Any]) -> None:
    """Write the job description atomically (temporary, fsync, rename)."""
    temp = work / f"{JOB_FILE}.tmp"
    with open(temp, "w", encoding="utf-8") as fp:
        json.dump(job, fp, sort_keys=True)
        fp.flush()
        os.fsync(fp.fileno())
    os.replace(temp, work / JOB_FILE)


def read_journal(work: Path) -> list[str]:
    """The outputs a journal records as finished, in order.

    A line cut short by a kill (no newline yet) is not a record and is ignored.
    """
    try:
        data = (work / JOURNAL_FILE).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise ConvertError(f"{work / JOURNAL_FILE}: cannot read the journal: {err}") from None
    names = []
    for line in data.split(b"\n")[:-1]:
        try:
            name = json.loads(line)
        except ValueError:
            raise ConvertError(
                f"{work / JOURNAL_FILE}: damaged journal line {line[:60]!r}; expected a JSON "
                "string (run without --resume to start over)"
            ) from None
        names.append(str(name))
    return names


class Journal:
    """Appends finished outputs to the journal; each record is on disk when `record` returns."""

    def __init__(self, work: Path) -> None:
        self.path = work / JOURNAL_FILE
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, names: Sequence[str]) -> None:
        """Append `names`, one JSON-quoted line each (any name fits on a line), and fsync once."""
        os.write(self._fd, "".join(json.dumps(name) + "\n" for name in names).encode("utf-8"))
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the journal file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class WorkLock:
    """An exclusive lock on a work folder, so two conversions never write one output."""

    def __init__(self, work: Path, dst: Path) -> None:
        self._fd = os.open(work / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise ConvertError(
                f"{dst}: another conversion is writing this output (its work folder {work} is "
                "locked); expected no other conversion into the same destination"
            ) from None

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def remove_work(work: Path) -> None:
    """Delete a work folder and everything in it (nothing if it is already gone)."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(work)


def keeps_partial(failure: BaseException) -> bool:
    """Whether a run that failed this way keeps its work folder for `--resume`.

    A failure lazyparams recognises as caused by the source (corrupt data, a check failing on
    read, a file that shrank) or by the transform (a kernel refusing its input) fails the same
    way on every rerun: its partial output is removed. Everything else keeps it: an interruption,
    an operating-system error (a full disk, a file size limit, a failing device), memory running
    out, an `OutputError`, and an exception lazyparams does not know (a user's kernel that failed
    once, say), which a rerun may well get past.
    """
    return isinstance(failure, OutputError) or not isinstance(failure, LazyParamsError)
