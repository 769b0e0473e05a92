"""The staged writer of every format laid out by slots (npz, .npy folder, GGUF, PyTorch, ...).

The work folder (see `journal`) holds the output's files, laid out in full before any data
(a `Layout` from the format's module, see `io.output_formats`), `job.json` and a journal whose
lines are `[name, check]` for every tensor synced to disk: the CRC-32 of its bytes in a zip
(npz, PyTorch: zip needs it in the member's header), of sampled blocks otherwise (all of a
tensor up to 1 MiB, else its ends and 16 spread blocks), so that writing costs no second pass
over the data. Files are synced and the journal written on a thread of their own. A resume
reuses a journaled tensor only after its bytes read back with the recorded check. Publishing
writes a marker file, then renames the output into place (once, or once per part of a split
GGUF); a resume after a kill there completes it and cleans up.
Imports `io` and the engine's own modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lazyparams.engine.journal import remove_work, work_dir, write_job
from lazyparams.errors import CheckpointError, ConvertError, OutputError
from lazyparams.io import TensorInfo
from lazyparams.io.filemap import BackgroundSync, write_array_at
from lazyparams.io.npy_format import stored_form
from lazyparams.io.output_layout import FOLDER, Layout, Slot
from lazyparams.io.partial import RowLedger, flat_info, rows_offset
from lazyparams.io.staging import fsync_path

DATA_DIR = "data"
RECORDS_FILE = "records"
PUBLISHING_FILE = "publishing"
JOURNAL_SECONDS = 0.25
"""Finished tensors are synced and journaled together at most this often (and at the end)."""
_CHUNK = 16 * 1024 * 1024
_SAMPLE_WHOLE = 1 << 20
_SAMPLE_END = 64 * 1024
_SAMPLE_BLOCK = 4096
_SAMPLE_SPREAD = 16


class StagedFiles:
    """An output written by slot into the work folder's files, as its `Layout` places them.

    Made fresh it replaces any earlier work folder; with `done` (the verified records of a
    resume, name -> CRC) it reopens the files and writes only the other tensors.
    """

    def __init__(
        self,
        dst: Path,
        layout: Layout,
        infos: Sequence[TensorInfo],
        job: dict[str, Any],
        done: dict[str, int] | None,
    ) -> None:
        self.dst, self.work, self.layout = dst, work_dir(dst), layout
        self.data = self.work / DATA_DIR
        self.infos = {info.name: info for info in infos}
        self.files = tuple(str(final) for _, final in layout.published)
        self.crcs: dict[str, int] = dict(done or {})
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._rows = RowLedger(str(dst), self.infos, self._taken, self._lock)
        self._fds: list[int] = []
        self._pending: list[str] = []
        self._flushed_at = time.monotonic()
        self._records = -1
        self._syncer = BackgroundSync()
        try:
            self._open(job, fresh=done is None)
        except OSError as err:
            self._close()
            raise ConvertError(
                f"{err.filename or dst}: cannot write the output: {err.strerror or err}; "
                "expected a writable destination folder"
            ) from None

    def _open(self, job: dict[str, Any], fresh: bool) -> None:
        if fresh:
            remove_work(self.work)
            self.data.mkdir(parents=True)
            self.layout.create(self.data)
        if not (self.work / PUBLISHING_FILE).exists():
            self._fds = [os.open(self.data / f, os.O_RDWR) for f in self.layout.files]
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._records = os.open(self.work / RECORDS_FILE, flags, 0o644)
        if fresh:
            write_job(self.work, job)  # last: a job file means every data file exists

    # Writing ---------------------------------------------------------------------------------

    def write(self, name: str, array: Any) -> None:
        """Write one declared output into its slot; journal it once synced."""
        self._rows.claim_whole(name, array, self._busy)
        slot = self.layout.slots[name]
        data = np.ascontiguousarray(self._stored(name, array))
        raw = memoryview(data.reshape(-1).view(np.uint8).data)
        crc = checksum(self.layout, slot, lambda at, count: raw[at : at + count])
        self._guarded(name, lambda: self._put(name, raw, crc))

    def write_rows(self, name: str, start: int, block: Any) -> None:
        """Write rows of a declared output; once its last rows are there, journal it (its CRC
        read back from the file, as blocks may arrive in any order)."""
        first, rows = self._rows.claim(name, start, block)
        slot = self.layout.slots[name]
        fd = self._fds[slot.file]
        at = slot.data_at + rows_offset(flat_info(self.infos[name]), first)

        def put() -> None:
            write_array_at(fd, self._stored(name, rows), at)
            if self._rows.stored(name, rows.shape[0]):
                self._finish(name, self._read_crc(name, slot))

        self._guarded(name, put)

    def _stored(self, name: str, array: Any) -> Any:
        """The array as the format stores it (raw bits for dtypes numpy cannot spell)."""
        return stored_form(array, self.infos[name].dtype) if self.layout.numpy else array

    def _put(self, name: str, raw: memoryview, crc: int) -> None:
        slot = self.layout.slots[name]
        write_array_at(self._fds[slot.file], np.frombuffer(raw, np.uint8), slot.data_at)
        self._finish(name, crc)

    def _finish(self, name: str, crc: int) -> None:
        """Write the slot's header (with its CRC), then count the tensor as done."""
        slot = self.layout.slots[name]
        os.pwrite(self._fds[slot.file], self.layout.head(name, crc), slot.head_at)
        with self._lock:
            self.crcs[name] = crc
            self._pending.append(name)
            due = time.monotonic() - self._flushed_at >= JOURNAL_SECONDS
            if due and self._syncer.idle:
                self._flush()

    def _guarded(self, name: str, step: Any) -> None:
        """Run a write step; a failing disk is named with the tensor and the file."""
        try:
            step()
        except OSError as err:
            path = self.data / self.layout.files[self.layout.slots[name].file]
            reason = err.strerror or str(err)
            raise OutputError(
                f"{reason} while writing tensor {name!r} to {self.dst} (in {path}); the tensors "
                "written before it are kept: free space, then rerun with --resume"
            ) from None

    def _read_crc(self, name: str, slot: Slot) -> int:
        """The check of a slot whose data is in the file and whose header is not yet."""
        fd = self._fds[slot.file]
        return checksum(self.layout, slot, lambda at, count: os.pread(fd, count, slot.data_at + at))

    def _taken(self, name: str) -> bool:
        return name in self.crcs or name in self._busy

    def _flush(self) -> None:
        """Hand the finished tensors to the sync thread: it syncs the files, then journals
        them (the caller holds the lock)."""
        if not self._pending or self._records < 0:
            return
        lines = "".join(json.dumps([n, self.crcs[n]]) + "\n" for n in self._pending)
        records = self._records
        files = [
            (fd, str(self.data / f)) for fd, f in zip(self._fds, self.layout.files, strict=True)
        ]

        def journal() -> None:
            os.write(records, lines.encode("utf-8"))
            os.fsync(records)

        self._pending.clear()
        self._flushed_at = time.monotonic()
        self._syncer.submit(files, journal)

    def _drain(self) -> None:
        """Hand off and wait until every finished tensor is synced and journaled."""
        with self._lock:
            self._flush()
        self._syncer.wait()

    # Ending ----------------------------------------------------------------------------------

    def finalize(self) -> None:
        """Complete the files (an npz's central directory), then publish and clean up."""
        missing = [name for name in self.infos if name not in self.crcs]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise CheckpointError(f"{self.dst}: {self._rows.missing_message(missing[0])}{more}")
        try:
            self._drain()
            if self._fds:
                self._complete_files()
            self._close()
            self._publish()
        except OSError as err:
            raise OutputError(
                f"{err.strerror or err} while publishing {self.dst}; the finished output is "
                f"kept in {self.work}: rerun with --resume"
            ) from None
        remove_work(self.work)

    def _complete_files(self) -> None:
        trailer = self.layout.trailer(self.crcs)
        if trailer:
            end = self.layout.sizes[0]
            os.pwrite(self._fds[0], trailer, end)
            os.ftruncate(self._fds[0], end + len(trailer))
        for fd in self._fds:
            os.fsync(fd)

    def _publish(self) -> None:
        """Write the marker that says publishing began, then rename the output into place (one
        rename, or one per part): a resume after a kill here completes it and cleans up."""
        if self.data.exists():  # a resumed publish may find the whole folder moved
            fsync_path(self.data)
        published = self.layout.published
        self.dst.parent.mkdir(parents=True, exist_ok=True)
        if not (self.work / PUBLISHING_FILE).exists():
            (self.work / PUBLISHING_FILE).write_text("\n".join(self.files) + "\n")
            fsync_path(self.work)
        for relative, final in published:
            source = self.data if relative == FOLDER else self.data / relative
            if source.exists():  # a resumed publish finds some parts already moved
                os.rename(source, final)
        fsync_path(self.dst.parent)

    def abort(self) -> None:
        """Stop and delete everything written, the work folder included."""
        self._close()
        remove_work(self.work)

    def suspend(self) -> None:
        """Stop, keeping the work folder and its journal for `--resume`."""
        with contextlib.suppress(OSError):
            self._drain()  # a disk that fails here loses only the unjournaled tensors
        self._close()

    def _close(self) -> None:
        self._syncer.close()
        while self._fds:
            os.close(self._fds.pop())
        if self._records >= 0:
            os.close(self._records)
            self._records = -1


def _crc_head(slot: Slot) -> bytes:
    """The part of a slot's header its CRC covers (an npz member's npy header, a .npy file's)."""
    return slot.head[slot.crc_from - slot.head_at :] if slot.crc_from < slot.data_at else b""


def checksum(layout: Layout, slot: Slot, read: Any) -> int:
    """A slot's check from `read(offset in its data, count) -> bytes`: the CRC-32 of every
    byte for a zip member (an npz member's npy header included), of the sampled ranges for
    the other formats."""
    length = slot.end - slot.data_at
    crc = zlib.crc32(_crc_head(slot))
    ranges = [(0, length)] if layout.members else sample_ranges(length)
    for start, end in ranges:
        for at in range(start, end, _CHUNK):
            crc = zlib.crc32(read(at, min(_CHUNK, end - at)), crc)
    return crc


def sample_ranges(length: int) -> list[tuple[int, int]]:
    """The byte ranges a sampled check reads: all of a tensor up to 1 MiB, else its first and
    last 64 KiB and 16 blocks of 4 KiB spread evenly between them."""
    if length <= _SAMPLE_WHOLE:
        return [(0, length)]
    step = (length - 2 * _SAMPLE_END) // (_SAMPLE_SPREAD + 1)
    inner = [_SAMPLE_END + step * (i + 1) for i in range(_SAMPLE_SPREAD)]
    return [
        (0, _SAMPLE_END),
        *((at, at + _SAMPLE_BLOCK) for at in inner),
        (length - _SAMPLE_END, length),
    ]


def verified_done(dst: Path, layout: Layout) -> dict[str, int]:
    """The journaled tensors of DST's work folder (name -> CRC) whose bytes still read back
    with their recorded CRC; the others are written again. ConvertError if a file is missing
    or is not the layout's."""
    work = work_dir(dst)
    records = dict(read_records(work))
    unknown = next((name for name in records if name not in layout.slots), None)
    if unknown is not None:
        raise ConvertError(
            f"{work / RECORDS_FILE}: records tensor {unknown!r}, which this conversion does not "
            "write; expected the same job (run without --resume to start over)"
        )
    if (work / PUBLISHING_FILE).exists():
        return records  # complete and synced before its publishing began
    fds = [_open_checked(work, layout, index) for index in range(len(layout.files))]
    try:
        return {name: crc for name, crc in records.items() if _intact(fds, layout, name, crc)}
    finally:
        for fd in fds:
            os.close(fd)


def open_work_file(path: Path, flags: int, what: str) -> int:
    """A file of an interrupted conversion's work folder, opened with `flags`; ConvertError
    naming it (`what`: file, shard) if it is missing."""
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise ConvertError(
            f"{path}: the interrupted conversion's {what} is missing; expected it in the work "
            "folder (run without --resume to start over)"
        ) from None


def _open_checked(work: Path, layout: Layout, index: int) -> int:
    """A work file opened for reading, checked to have the layout's size and first bytes."""
    path = work / DATA_DIR / layout.files[index]
    size, prefix = layout.sizes[index], layout.prefixes[index]
    fd = open_work_file(path, os.O_RDONLY, "file")
    found = os.fstat(fd).st_size
    sized = found == size or (bool(layout.members) and found > size)  # a directory written
    if not sized or os.pread(fd, len(prefix), 0) != prefix:
        os.close(fd)
        raise ConvertError(
            f"{path}: the interrupted conversion's file is damaged or was laid out for other "
            f"options; expected {size} bytes starting with its header (run without --resume "
            "to start over)"
        )
    return fd


def _intact(fds: Sequence[int], layout: Layout, name: str, crc: int) -> bool:
    """Whether a journaled tensor's header and bytes are as recorded."""
    slot = layout.slots[name]
    head = layout.head(name, crc)[: slot.crc_from - slot.head_at]
    fd = fds[slot.file]
    if os.pread(fd, len(head), slot.head_at) != head:
        return False
    return checksum(layout, slot, lambda at, count: os.pread(fd, count, slot.data_at + at)) == crc


def read_records(work: Path) -> list[tuple[str, int]]:
    """The `[name, crc]` records of a work folder's journal; a line cut short by a kill (no
    newline yet) is not a record."""
    try:
        data = (work / RECORDS_FILE).read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in data.split(b"\n")[:-1]:
        try:
            name, crc = json.loads(line)
            records.append((str(name), int(crc)))
        except (ValueError, TypeError):
            raise ConvertError(
                f"{work / RECORDS_FILE}: damaged journal line {line[:60]!r}; expected "
                '["name", crc] (run without --resume to start over)'
            ) from None
    return records
