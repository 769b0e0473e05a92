"""Writes behind the writer and background syncs (io.filemap): bytes, windows, order, errors."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from lazyparams.io import filemap
from lazyparams.io.filemap import BackgroundSync, write_array_at

MiB = 1 << 20


@pytest.fixture(name="small_windows")
def small_windows_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 1 MiB, a window of 3 MiB: a few MiB exercise every step."""
    monkeypatch.setattr(filemap, "WRITE_CHUNK_BYTES", MiB)
    monkeypatch.setattr(filemap, "WRITE_BEHIND_BYTES", 3 * MiB)


@pytest.fixture(name="fd")
def fd_fixture(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "out.bin", os.O_RDWR | os.O_CREAT, 0o644)
    yield fd
    os.close(fd)


def test_a_large_array_is_written_whole_at_its_offset(small_windows: None, fd: int) -> None:
    array = np.arange(5 * MiB // 4 + 3, dtype=np.float32)  # not a whole number of chunks
    write_array_at(fd, array, 4096)
    data = os.pread(fd, array.nbytes + 10, 4096)
    assert data == array.tobytes()
    assert os.fstat(fd).st_size == 4096 + array.nbytes


def test_each_write_call_copies_a_bounded_piece_and_short_writes_go_on(
    small_windows: None, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers writing into one file take turns at its lock one short call at a time; a
    call that writes less than asked for is continued where it stopped."""
    monkeypatch.setattr(filemap, "WRITE_CALL_BYTES", 256 * 1024)
    calls: list[tuple[int, int]] = []
    real = os.pwrite

    def short_pwrite(fd: int, data: memoryview, offset: int) -> int:
        calls.append((offset, len(data)))
        return real(fd, data[: len(data) - 1000 if len(calls) == 2 else len(data)], offset)

    monkeypatch.setattr(os, "pwrite", short_pwrite)
    array = np.arange(3 * MiB // 8 + 5, dtype=np.float64)
    write_array_at(fd, array, 100)
    assert max(length for _, length in calls) == 256 * 1024
    assert calls[2][0] == calls[1][0] + calls[1][1] - 1000  # the short write continued
    assert os.pread(fd, array.nbytes, 100) == array.tobytes()


def test_the_oldest_bytes_are_settled_once_the_window_is_full(
    small_windows: None, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    settled: list[tuple[int, int]] = []
    monkeypatch.setattr(filemap, "_settle", lambda _fd, off, length: settled.append((off, length)))
    write_array_at(fd, np.zeros(4 * MiB, np.uint8), 0)
    assert settled == [(0, MiB)]  # 4 MiB written, 3 may lag behind
    write_array_at(fd, np.zeros(2 * MiB, np.uint8), 8 * MiB)
    assert settled == [(0, MiB), (MiB, MiB), (2 * MiB, MiB)]


def test_small_writes_are_left_to_the_kernel(fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    monkeypatch.setattr(filemap, "_start_writeback", lambda _fd, off, length: started.append(off))
    write_array_at(fd, np.ones(1000, np.uint8), 0)
    write_array_at(fd, np.ones(MiB, np.uint8), MiB)
    assert started == [MiB]


def test_an_error_the_disk_reports_on_the_way_raises(
    small_windows: None, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(_fd: int, _offset: int, _length: int, flags: int) -> int:
        if flags == 2:  # starting the writeback: fine
            return 0
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(filemap, "_range_syncer", lambda: failing)
    with pytest.raises(OSError) as err:
        write_array_at(fd, np.zeros(4 * MiB, np.uint8), 0)
    assert err.value.errno == errno.EIO


def recording_sync(events: list[tuple[str, object]]) -> Callable[[int], None]:
    def sync(fd: int) -> None:
        events.append(("sync", fd))

    return sync


def test_jobs_run_in_order_each_after_its_syncs(fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, object]] = []
    monkeypatch.setattr(filemap, "sync_data", recording_sync(events))
    syncer = BackgroundSync()
    try:
        syncer.submit([(fd, "a"), (fd + 100, "b")], lambda: events.append(("then", 1)))
        syncer.submit([(fd, "a")], lambda: events.append(("then", 2)))
        syncer.wait()
        assert syncer.idle
    finally:
        syncer.close()
    assert events == [("sync", fd), ("sync", fd + 100), ("then", 1), ("sync", fd), ("then", 2)]


def test_a_failed_sync_names_its_file_and_stops_later_jobs(
    fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    ran: list[int] = []

    def failing(_fd: int) -> None:
        release.wait(5)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(filemap, "sync_data", failing)
    syncer = BackgroundSync()
    try:
        syncer.submit([(fd, "shard-1.safetensors")], lambda: ran.append(1))
        syncer.submit([(fd, "shard-2.safetensors")], lambda: ran.append(2))
        release.set()
        with pytest.raises(OSError) as err:
            syncer.wait()
        assert err.value.filename == "shard-1.safetensors" and err.value.errno == errno.EIO
        with pytest.raises(OSError, match="Input/output error"):
            syncer.submit([(fd, "shard-3.safetensors")], lambda: ran.append(3))
    finally:
        syncer.close()
    assert ran == []


def test_close_finishes_the_queued_jobs(fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, object]] = []
    monkeypatch.setattr(filemap, "sync_data", recording_sync(events))
    syncer = BackgroundSync()
    syncer.submit([(fd, "a")], lambda: events.append(("then", 1)))
    syncer.close()
    syncer.close()
    assert events == [("sync", fd), ("then", 1)]


def test_a_mapped_array_is_copied_file_to_file(
    small_windows: None, tmp_path: Path, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.bin"
    values = np.arange(3 * MiB // 8, dtype=np.float64)
    source.write_bytes(b"head" * 4 + values.tobytes())
    copies: list[tuple[int, int, int]] = []
    copy = os.copy_file_range

    def recording(src: int, dst: int, count: int, src_at: int, dst_at: int) -> int:
        copies.append((count, src_at, dst_at))
        return copy(src, dst, count, src_at, dst_at)

    monkeypatch.setattr(os, "copy_file_range", recording, raising=False)
    src_fd = os.open(source, os.O_RDONLY)
    try:
        mapped = filemap.map_array(src_fd, 16, values.dtype, values.shape, path=str(source))
        write_array_at(fd, mapped, 8)
        write_array_at(fd, mapped[1:], 8 + values.nbytes)  # a view: written from memory
    finally:
        os.close(src_fd)
    assert copies == [(MiB, 16 + i * MiB, 8 + i * MiB) for i in range(3)]  # piece by piece
    written = os.pread(fd, 2 * values.nbytes, 8)
    assert written == values.tobytes() + values[1:].tobytes()


def test_a_refused_file_copy_falls_back_to_writing(
    tmp_path: Path, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refusing(*_: int) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refusing, raising=False)
    source = tmp_path / "in.bin"
    source.write_bytes(bytes(range(256)) * 8)
    src_fd = os.open(source, os.O_RDONLY)
    try:
        mapped = filemap.map_array(src_fd, 0, np.dtype(np.uint8), (2048,), path=str(source))
        write_array_at(fd, mapped, 0)
    finally:
        os.close(src_fd)
    assert os.pread(fd, 4096, 0) == source.read_bytes()


def test_a_range_sync_the_file_system_does_not_take_is_only_advice(
    small_windows: None, fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refusing(_fd: int, _offset: int, _length: int, _flags: int) -> int:
        ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(filemap, "_range_syncer", lambda: refusing)
    array = np.arange(4 * MiB, dtype=np.uint8)
    write_array_at(fd, array, 0)
    assert os.pread(fd, array.nbytes, 0) == array.tobytes()
