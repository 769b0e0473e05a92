"""Where a conversion writes, published only when complete.

safetensors (the default) is built in the work folder beside DST (see `journal`): shard files
preallocated with their headers, each tensor written at its offset, then synced and journaled
in batches on a thread of their own (so writing goes on meanwhile), so a killed run can resume;
`finalize` renames the result into place. The formats laid out by slots (npz, npy, GGUF,
PyTorch) are built the same way (see `staged`); a sink object the caller holds is used as
given. Imports `io` and the engine's own modules.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from lazyparams.engine.fingerprint import check_unchanged
from lazyparams.engine.journal import (
    JOURNAL_FILE,
    Journal,
    WorkLock,
    read_job,
    read_journal,
    remove_work,
    work_dir,
    write_job,
)
from lazyparams.engine.staged import open_work_file
from lazyparams.errors import CheckpointError, ConvertError, OutputError
from lazyparams.io import CheckpointSink, TensorInfo, plan_shards
from lazyparams.io.filemap import BackgroundSync, write_array_at
from lazyparams.io.partial import RowLedger, accepts_rows, flat_info, rows_offset
from lazyparams.io.safetensors_format import build_header
from lazyparams.io.safetensors_sink import ShardPlan, index_json
from lazyparams.io.staging import fsync_path

DATA_DIR = "data"

SOURCE_FILES = "source_files"
"""The job key holding the source files' content fingerprints (see `fingerprint`)."""
JOURNAL_SECONDS = 0.25
"""Finished outputs are synced and journaled together at most this often, and when a shard is
complete (and at the end)."""


class Output(Protocol):
    """A destination being written: `write` each output once (or `write_rows` blocks of rows
    covering it once), then `finalize` or `abort`.

    `suspend` stops writing but keeps what a later `--resume` can continue from.
    """

    files: tuple[str, ...]

    def write(self, name: str, array: Any) -> None: ...
    def write_rows(self, name: str, start: int, block: Any) -> None: ...
    def finalize(self) -> None: ...
    def abort(self) -> None: ...
    def suspend(self) -> None: ...


class SinkOutput:
    """An io-layer sink (atomic, not resumable) as an Output."""

    def __init__(self, sink: CheckpointSink, files: Sequence[str]) -> None:
        self.sink, self.files = sink, tuple(files)

    def write(self, name: str, array: Any) -> None:
        self.sink.write(name, array)

    def write_rows(self, name: str, start: int, block: Any) -> None:
        if not accepts_rows(self.sink):
            raise ConvertError(
                f"sink {type(self.sink).__name__}: expected a write_rows method to take tensor "
                f"{name!r} in blocks of rows, got a sink without one"
            )
        self.sink.write_rows(name, start, block)  # type: ignore[attr-defined]

    def finalize(self) -> None:
        self.sink.finalize()

    def abort(self) -> None:
        self.sink.abort()

    def suspend(self) -> None:
        self.sink.abort()


class StagedSafetensors:
    """A safetensors checkpoint (sharded or not) built in DST's work folder, tensor by tensor.

    Made fresh, it replaces any earlier work folder; made with `resume`, it reopens the files
    of the work folder, whose journal lists the outputs already there. `metadata` is every
    file's `__metadata__` (the source's, kept).
    """

    def __init__(
        self,
        dst: Path,
        infos: Sequence[TensorInfo],
        shard_size: int | None,
        job: dict[str, Any],
        resume: bool,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.dst, self.work = dst, work_dir(dst)
        self.metadata = metadata
        self.infos = {info.name: info for info in infos}
        self.plan = plan_shards(dst, infos, shard_size)
        self.files = tuple(str(f) for f in published_files(self.plan))
        self.done: set[str] = set(read_journal(self.work)) if resume else set()
        self._lock = threading.Lock()
        self._fds: list[int] = []
        self._where: dict[str, tuple[int, int]] = {}
        self._busy: set[str] = set()
        self._rows = RowLedger(str(dst), self.infos, self._taken, self._lock)
        self._work_lock: WorkLock | None = None
        self._journal: Journal | None = None
        self._pending: list[tuple[int, str]] = []
        self._flushed_at = time.monotonic()
        self._paths: dict[int, Path] = {}
        self._unwritten: dict[int, int] = {}  # per shard: outputs not yet written
        self._syncer: BackgroundSync | None = None
        try:
            self._open_work(job, resume)
            self._journal = Journal(self.work)
            self._count_unwritten()
            self._syncer = BackgroundSync()
        except OSError as err:
            self._close()
            raise ConvertError(
                f"{dst}: cannot write the output: {err}; expected a writable destination folder"
            ) from None

    # Setting up ------------------------------------------------------------------------------

    def _open_work(self, job: dict[str, Any], resume: bool) -> None:
        if resume:
            self._work_lock = WorkLock(self.work, self.dst)
            for final, group in self.plan.shards:
                self._reopen_shard(final, group)
            return
        headers = [build_header(g, self.metadata, path=str(f)) for f, g in self.plan.shards]
        if self.work.exists():
            WorkLock(self.work, self.dst).release()  # refuse if another run is writing it
            remove_work(self.work)
        try:
            self._create_work(job, headers)
        except BaseException:
            self.abort()
            raise

    def _create_work(
        self, job: dict[str, Any], headers: list[tuple[bytes, dict[str, int]]]
    ) -> None:
        self.dst.parent.mkdir(parents=True, exist_ok=True)
        self.work.mkdir()
        self._work_lock = WorkLock(self.work, self.dst)
        (self.work / DATA_DIR).mkdir()
        for (final, group), (header, offsets) in zip(self.plan.shards, headers, strict=True):
            path = self.work / DATA_DIR / final.name
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            self._fds.append(fd)
            self._paths[fd] = path
            os.pwrite(fd, header, 0)
            os.ftruncate(fd, len(header) + sum(info.nbytes for info in group))
            self._where.update((name, (fd, offset)) for name, offset in offsets.items())
        if self.plan.index is not None:
            (self.work / DATA_DIR / self.plan.index.name).write_bytes(index_json(self.plan))
        write_job(self.work, job)  # last: a job file means every data file exists

    def _reopen_shard(self, final: Path, group: list[TensorInfo]) -> None:
        header, offsets = build_header(group, self.metadata, path=str(final))
        path = self.work / DATA_DIR / final.name
        size = len(header) + sum(info.nbytes for info in group)
        fd = open_work_file(path, os.O_RDWR, "shard")
        self._fds.append(fd)
        self._paths[fd] = path
        if os.fstat(fd).st_size != size or os.pread(fd, len(header), 0) != header:
            raise ConvertError(
                f"{path}: the interrupted conversion's shard is damaged; expected {size} bytes "
                "starting with its header (run without --resume to start over)"
            )
        self._where.update((name, (fd, offset)) for name, offset in offsets.items())

    # Writing ---------------------------------------------------------------------------------

    def write(self, name: str, array: Any) -> None:
        """Write one declared output at its offset, sync it, then journal it."""
        self._claim(name, array)
        fd, offset = self._where[name]
        try:
            write_array_at(fd, array, offset)
            self._record(fd, name)
        except OSError as err:
            raise OutputError(f"{self.dst}: writing tensor {name!r} failed: {err}") from None

    def write_rows(self, name: str, start: int, block: Any) -> None:
        """Write rows of a declared output at their offset; once its last rows are there,
        sync and journal it (a resume rewrites an output whose rows were not all written)."""
        first, rows = self._rows.claim(name, start, block)
        fd, offset = self._where[name]
        try:
            write_array_at(fd, rows, offset + rows_offset(flat_info(self.infos[name]), first))
            if self._rows.stored(name, rows.shape[0]):
                self._record(fd, name)
        except OSError as err:
            raise OutputError(f"{self.dst}: writing tensor {name!r} failed: {err}") from None

    def record_written(self, names: list[str]) -> None:
        """Journal outputs another process wrote into the work folder's files and synced."""
        with self._lock:
            self.done.update(names)
            if self._journal is not None:
                self._journal.record(names)

    def data_path(self, name: str) -> tuple[Path, int]:
        """The work-folder file holding output `name`, and the offset of its data there."""
        fd, offset = self._where[name]
        final = self.plan.shards[self._fds.index(fd)][0]
        return self.work / DATA_DIR / final.name, offset

    def _count_unwritten(self) -> None:
        for name, (fd, _) in self._where.items():
            self._unwritten[fd] = self._unwritten.get(fd, 0) + (name not in self.done)

    def _record(self, fd: int, name: str) -> None:
        """Count output `name` written; hand the finished outputs to the sync thread when its
        shard is complete, or when the last hand-off is `JOURNAL_SECONDS` old and the thread
        has nothing to do (else they wait for the next one)."""
        with self._lock:
            self.done.add(name)
            self._pending.append((fd, name))
            self._unwritten[fd] -= 1
            due = time.monotonic() - self._flushed_at >= JOURNAL_SECONDS
            if self._unwritten[fd] == 0 or (due and self._syncer and self._syncer.idle):
                self._hand_off()

    def _hand_off(self) -> None:
        """Have the sync thread sync the shards of the finished outputs, then journal them (the
        caller holds the lock): the bytes are always on disk before the journal names them, and
        a resume loses at most the outputs of the last `JOURNAL_SECONDS` or so."""
        if not self._pending or self._syncer is None or self._journal is None:
            return
        batch, self._pending = self._pending, []
        files = [(fd, str(self._paths[fd])) for fd in dict.fromkeys(fd for fd, _ in batch)]
        names, journal = [name for _, name in batch], self._journal
        self._flushed_at = time.monotonic()
        try:
            self._syncer.submit(files, lambda: journal.record(names))
        except OSError as err:
            self._sync_failed(err)

    def _flush_journal(self) -> None:
        """Sync and journal every finished output, and wait until that is done (the caller
        holds the lock)."""
        self._hand_off()
        if self._syncer is None:
            return
        try:
            self._syncer.wait()
        except OSError as err:
            self._sync_failed(err)

    def _sync_failed(self, err: OSError) -> None:
        culprit = err.filename or self.work / JOURNAL_FILE
        raise ConvertError(
            f"{culprit}: syncing the output to disk failed: {err.strerror or err}; expected a "
            "disk that keeps what is written (the outputs journaled before it can --resume)"
        ) from None

    def _taken(self, name: str) -> bool:
        return name in self.done or name in self._busy

    def _claim(self, name: str, array: Any) -> None:
        self._rows.claim_whole(name, array, self._busy)

    # Ending ----------------------------------------------------------------------------------

    def finalize(self) -> None:
        """Move the complete checkpoint into place and delete the work folder."""
        missing = [name for name in self.infos if name not in self.done]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise CheckpointError(f"{self.dst}: {self._rows.missing_message(missing[0])}{more}")
        with self._lock:
            self._flush_journal()
        for fd in self._fds:
            os.fsync(fd)
        self._close_files()
        self._publish()
        remove_work(self.work)
        self._close()  # the lock is held until the work folder is gone

    def _publish(self) -> None:
        data = self.work / DATA_DIR
        fsync_path(data)
        if self.plan.shards[0][0].parent == self.dst:
            os.rename(data, self.dst)  # one rename publishes the whole folder
        else:
            # the index goes last: a reader that finds it finds every shard
            for path in self.files:
                os.rename(data / Path(path).name, path)
        fsync_path(self.dst.parent)

    def abort(self) -> None:
        """Stop and delete everything written, the work folder included."""
        self.suspend()
        remove_work(self.work)

    def suspend(self) -> None:
        """Stop, keeping the work folder and its journal (every finished output) for `--resume`."""
        with self._lock, contextlib.suppress(OSError, ConvertError):
            self._flush_journal()  # a disk that fails here loses only the unjournaled outputs
        self._close()

    def _close(self) -> None:
        self._close_files()
        if self._work_lock is not None:
            self._work_lock.release()

    def _close_files(self) -> None:
        if self._syncer is not None:
            self._syncer.close()  # before the files it may be syncing
        while self._fds:
            os.close(self._fds.pop())
        if self._journal is not None:
            self._journal.close()


def published_files(plan: ShardPlan) -> list[Path]:
    """The final paths of a shard plan: shards, then the index if there is one."""
    index = [] if plan.index is None else [plan.index]
    return [final for final, _ in plan.shards] + index


def resumable_done(dst: Path, job: dict[str, Any]) -> set[str] | None:
    """The outputs an interrupted conversion of the same job already wrote into `dst`'s work
    folder, or None when there is none to resume; ConvertError if it was another job."""
    work = work_dir(dst)
    previous = read_job(work)
    if previous is None:
        return None
    for key, value in job.items():
        if key == SOURCE_FILES:
            check_unchanged(previous.get(key) or {}, value, f"{dst}")
        elif previous.get(key) != value:
            raise ConvertError(
                f"{dst}: the interrupted conversion in {work} had a different {key}; expected "
                "the same transform, source and options to resume (run without --resume to "
                "start over)"
            )
    return set(read_journal(work))
