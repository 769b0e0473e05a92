"""A plan or conversion given no budget takes the default, from the memory the process can use
(here a fake /proc and cgroup): rows go in blocks to fit it, or the run is refused naming it;
a given budget wins, and `none` turns it off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lazyparams.cli import main
from lazyparams.engine import convert, memory_limit, plan
from lazyparams.engine.chunking import row_outputs
from lazyparams.errors import BudgetError
from lazyparams.io import TensorInfo, open_sink
from tests.engine.test_memory_limit import fake_proc

TENSOR = 1024 * 256 * 4  # one float32 tensor: 1 MiB
HEADROOM = 1 << 20


@pytest.fixture(scope="module", name="src")
def src_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "model.safetensors"
    rng = np.random.default_rng(3)
    tensors = {f"w{i}": rng.standard_normal((1024, 256)).astype(np.float32) for i in range(2)}
    with open_sink(path, [TensorInfo.from_array(n, a) for n, a in tensors.items()]) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    return path


@pytest.fixture(name="machine")
def machine_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine whose cgroup limits this process; its limit is set by `limit`."""
    proc = fake_proc(tmp_path / "proc", available=64 << 30)
    monkeypatch.setattr(memory_limit, "PROC", proc)
    monkeypatch.setattr(memory_limit, "CGROUP", tmp_path / "cg")
    monkeypatch.setattr(memory_limit, "HEADROOM", HEADROOM)
    monkeypatch.setattr(memory_limit, "FLOOR", 0)
    (tmp_path / "cg").mkdir()
    return tmp_path / "cg"


def limit(machine: Path, nbytes: int) -> None:
    (machine / "memory.max").write_text(f"{nbytes}\n")


def test_a_small_default_splits_rows_to_fit(src: Path, machine: Path) -> None:
    limit(machine, HEADROOM + TENSOR // 2)
    the_plan = plan("cast:float16", src)
    assert the_plan.budget == TENSOR // 2 and the_plan.budget_is_default
    assert the_plan.fits and row_outputs(the_plan.module) == ("w0", "w1")
    assert the_plan.summary()["budget_source"] == {
        "origin": "default",
        "note": "the cgroup v2 limit 1.5 MiB less 1.0 MiB headroom",
    }
    out: dict[str, np.ndarray] = {}
    report = convert("cast:float16", src, out, progress=False)
    assert report.measured_peak_bytes is not None and report.measured_peak_bytes <= TENSOR // 2
    assert sorted(out) == ["w0", "w1"]


def test_a_default_too_small_is_refused_naming_it(src: Path, machine: Path, tmp_path: Path) -> None:
    limit(machine, HEADROOM + 1024)
    message = plan("cast:float16", src).budget_message
    assert message is not None and message.startswith("memory budget of 1024 bytes")
    assert "the budget is the default (the cgroup v2 limit 1.0 MiB less 1.0 MiB headroom)" in (
        message
    )
    assert "--budget none" in message
    with pytest.raises(BudgetError, match="the budget is the default"):
        convert("cast:float16", src, tmp_path / "out.safetensors", progress=False)
    assert not (tmp_path / "out.safetensors").exists()


def test_a_given_budget_wins_and_none_turns_it_off(src: Path, machine: Path) -> None:
    limit(machine, HEADROOM + 1024)
    given = plan("cast:float16", src, budget=4 * TENSOR)
    assert given.fits and not given.budget_is_default and row_outputs(given.module) == ()
    assert given.summary()["budget_source"] == {"origin": "given", "note": None}
    off = plan("cast:float16", src, budget="none")
    assert off.budget is None and off.fits and row_outputs(off.module) == ()
    out: dict[str, np.ndarray] = {}
    convert("cast:float16", src, out, budget="none", progress=False)
    assert sorted(out) == ["w0", "w1"]


def test_workers_stay_within_a_default_that_holds_more(src: Path, machine: Path) -> None:
    limit(machine, HEADROOM + (1 << 30))
    one = plan("cast:float16", src)
    two = plan("cast:float16", src, workers=2)
    # the default is a ceiling: two workers plan the same bound as without a budget
    assert (
        two.predicted_peak_bytes
        == plan("cast:float16", src, workers=2, budget="none").predicted_peak_bytes
    )
    assert one.predicted_peak_bytes < two.predicted_peak_bytes < 1 << 30


def test_the_cli_prints_the_default_and_its_source(
    src: Path,
    machine: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows on one line each
    limit(machine, HEADROOM + TENSOR // 2)
    assert main(["plan", "cast:float16", str(src)]) == 0
    assert "default: the cgroup v2 limit 1.5 MiB less 1.0 MiB headroom" in capsys.readouterr().out
    assert main(["plan", "cast:float16", str(src), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["budget"] == TENSOR // 2 and summary["budget_source"]["origin"] == "default"
    limit(machine, HEADROOM + 1024)
    assert main(["plan", "cast:float16", str(src)]) == 1
    assert "the budget is the default" in capsys.readouterr().err
    assert main(["plan", "cast:float16", str(src), "--budget", "none", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["budget"] is None and summary["budget_source"]["origin"] == "off"


def test_without_proc_the_plan_says_there_is_no_default(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(memory_limit, "PROC", tmp_path / "no-proc")
    monkeypatch.setattr(memory_limit, "CGROUP", tmp_path / "no-cgroup")
    assert plan("cast:float16", src).budget is None
    assert main(["plan", "cast:float16", str(src)]) == 0
    assert "none (no default: the usable memory is unknown here)" in capsys.readouterr().out
