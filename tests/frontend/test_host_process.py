"""A library call leaves its host process as it found it: the collector's state and frozen
generation, malloc's settings, the kernel's peak-RSS mark. The command line, whose process it
is, opts in to them for each command and out again afterwards."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

import lazyparams
from lazyparams.cli import main
from lazyparams.engine import resident
from lazyparams.frontend import tracing


class _Recorder:
    """Stands in for libc and for the clear_refs write: records each call by name."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: object) -> int:
            self.calls.append(name)
            return 1

        return call


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> _Recorder:
    found = _Recorder()
    monkeypatch.setattr(resident.ctypes, "CDLL", lambda _name: found)
    monkeypatch.setattr(resident, "_malloc_tuned", [])
    monkeypatch.setattr(resident, "_reset_high_water_mark", lambda: bool(found.clear_refs()))
    return found


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    tensors = {"a.weight": np.ones((8, 4), np.float32), "b.weight": np.zeros((4,), np.float32)}
    save_file(tensors, str(src / "model.safetensors"))
    return src


@pytest.fixture
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_convert_leaves_the_collector_and_malloc_alone(
    recorder: _Recorder, checkpoint: Path, tmp_path: Path, collector_enabled: None
) -> None:
    frozen = gc.get_freeze_count()
    report = lazyparams.convert("cast:float16", checkpoint, tmp_path / "out", progress=False)
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
    assert recorder.calls == []
    assert report.measured_peak_bytes is None or report.measured_peak_bytes >= 0


def test_plan_and_trace_leave_a_paused_collector_paused(checkpoint: Path) -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        lazyparams.plan("cast:float16", checkpoint)
        lazyparams.trace(lambda p: {"y": p["x"]}, {"x": ((2, 2), "float32")})
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_the_paused_collector_promotes_only_where_the_process_opted_in(
    monkeypatch: pytest.MonkeyPatch, collector_enabled: None
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(tracing.gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(tracing.gc, "unfreeze", lambda: calls.append("unfreeze"))
    with tracing.collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled() and calls == []
    monkeypatch.setattr(tracing, "_promote", [True])
    with tracing.collection_paused():
        pass
    assert calls == ["freeze", "unfreeze"]


def test_the_command_line_opts_in_for_its_command_only(
    recorder: _Recorder, checkpoint: Path, tmp_path: Path
) -> None:
    assert main(["convert", "cast:float16", str(checkpoint), str(tmp_path / "out")]) == 0
    assert recorder.calls[:3] == ["mallopt", "malloc_trim", "clear_refs"]
    assert not resident._opted_in[0] and not tracing._promote[0]
    recorder.calls.clear()
    lazyparams.convert("cast:float16", checkpoint, tmp_path / "again", progress=False)
    assert recorder.calls == []
