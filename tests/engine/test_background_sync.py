"""The safetensors output syncs on a thread of its own: the journal never names an output
before the bytes of its shard are synced, and a failed sync stops the run naming the file."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import pytest

from lazyparams.engine import convert
from lazyparams.engine.journal import Journal, work_dir
from lazyparams.engine.output import StagedSafetensors
from lazyparams.errors import ConvertError
from lazyparams.io import filemap
from tests.engine.helpers import read_all, small_llama

Event = tuple[str, Any, str]


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def record_events(monkeypatch: pytest.MonkeyPatch, events: list[Event]) -> None:
    """Log each output written (with its shard's descriptor), each sync and each journal record,
    with the thread that did it."""
    lock = threading.Lock()
    record, sync, journal = StagedSafetensors._record, filemap.sync_data, Journal.record

    def log(kind: str, what: Any) -> None:
        with lock:
            events.append((kind, what, threading.current_thread().name))

    def recorded(self: StagedSafetensors, fd: int, name: str) -> None:
        log("written", (fd, name))
        record(self, fd, name)

    def synced(fd: int) -> None:
        sync(fd)
        log("synced", fd)

    def journaled(self: Journal, names: Any) -> None:
        log("journal", list(names))
        journal(self, names)

    monkeypatch.setattr(StagedSafetensors, "_record", recorded)
    monkeypatch.setattr(filemap, "sync_data", synced)
    monkeypatch.setattr(Journal, "record", journaled)


@pytest.mark.parametrize("workers", [1, 2])
def test_every_journaled_output_was_synced_after_it_was_written(
    llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr("lazyparams.engine.output.JOURNAL_SECONDS", 0.0)  # a record per write
    events: list[Event] = []
    record_events(monkeypatch, events)
    dst = tmp_path / "out"
    convert("cast:float16", llama_path, dst, shard_size=40_000, progress=False, workers=workers)
    journaled = [
        (at, name)
        for at, (kind, names, _) in enumerate(events)
        if kind == "journal"
        for name in names
    ]
    assert sorted(name for _, name in journaled) == sorted(read_all(llama_path))
    written = {
        what[1]: (at, what[0]) for at, (kind, what, _) in enumerate(events) if kind == "written"
    }
    for at, name in journaled:
        wrote_at, fd = written[name]
        assert any(
            kind == "synced" and what == fd and wrote_at < when < at
            for when, (kind, what, _) in enumerate(events)
        ), name
    assert {thread for kind, _, thread in events if kind != "written"} == {"lazyparams-sync"}
    assert sum(kind == "journal" for kind, _, _ in events) > 1


def test_a_finished_shard_is_synced_before_the_end(
    llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lazyparams.engine.output.JOURNAL_SECONDS", 3600.0)  # no timed records
    events: list[Event] = []
    record_events(monkeypatch, events)
    record = StagedSafetensors._record

    def settled(self: StagedSafetensors, fd: int, name: str) -> None:
        # a loaded machine may not run the sync thread before the writes end: let whatever a
        # finished shard handed off finish before the next write, so the order is the code's
        record(self, fd, name)
        if self._unwritten[fd] == 0 and self._syncer is not None:
            self._syncer.wait()

    monkeypatch.setattr(StagedSafetensors, "_record", settled)
    convert("cast:float16", llama_path, tmp_path / "out", shard_size=40_000, progress=False)
    kinds = [kind for kind, _, _ in events]
    shards = len({what[0] for kind, what, _ in events if kind == "written"})
    assert shards > 1
    # one record per finished shard, each before the next shard's last write
    assert kinds.count("journal") == shards
    assert kinds.index("journal") < len(kinds) - kinds[::-1].index("written") - 1


def test_a_failed_sync_is_a_convert_error_naming_the_shard(
    llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(filemap, "sync_data", failing)
    dst = tmp_path / "out"
    with pytest.raises(ConvertError) as err:
        convert("cast:float16", llama_path, dst, shard_size=40_000, progress=False)
    message = str(err.value)
    shard = work_dir(dst) / "data" / "model-00001-of-"
    assert message.startswith(str(shard)) and ".safetensors: syncing the output" in message
    assert "Input/output error; expected a disk that keeps what is written" in message
    assert not dst.exists()
    journal = work_dir(dst) / "journal"
    assert not journal.exists() or journal.read_bytes() == b""  # nothing claimed as synced
