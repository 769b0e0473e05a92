"""`workers` > 1: conversions on a thread pool within the budget, byte-identical to one worker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.cli import main
from lazyparams.engine import convert, plan
from lazyparams.errors import BudgetError, CheckpointError
from lazyparams.io import DictSink, DictSource, TensorInfo
from tests.engine.helpers import eager_fuse_cast, read_all, slow_spec, small_llama, tree_bytes

RECIPE = "fuse-qkv+cast:float16"


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def _reuse_output(params: Any) -> dict[str, Any]:
    """An output read again after it is handed off: in flight to a file sink it still holds
    memory the in-order prediction no longer counts."""
    t = params["w"].T
    return {"t": t, "u": (t + t) + t}


def test_workers_write_the_same_bytes_within_their_budget(llama_path: Path, tmp_path: Path) -> None:
    one = convert(RECIPE, llama_path, tmp_path / "one", shard_size=50_000, progress=False)
    for workers in (2, 3):
        dst = tmp_path / f"w{workers}"
        report = convert(
            RECIPE, llama_path, dst, shard_size=50_000, progress=False, workers=workers
        )
        assert tree_bytes(dst) == tree_bytes(tmp_path / "one")
        the_plan = report.plan
        assert the_plan.parallel is not None
        budget = workers * the_plan.parallel.peak_bytes
        assert the_plan.worker_budget_bytes == report.predicted_peak_bytes == budget
        assert report.measured_peak_bytes is not None
        assert one.predicted_peak_bytes < report.measured_peak_bytes <= budget
        assert report.tensors_read == one.tensors_read
        assert report.tensors_written == one.tensors_written


def test_a_budget_bounds_the_workers(llama_path: Path, tmp_path: Path) -> None:
    expected = eager_fuse_cast(read_all(llama_path))
    peak = plan(RECIPE, llama_path).predicted_peak_bytes
    for budget in (peak, peak + peak // 2):
        sink: dict[str, np.ndarray] = {}
        report = convert(RECIPE, llama_path, sink, budget=budget, workers=2, progress=False)
        assert report.plan.worker_budget_bytes == report.predicted_peak_bytes == budget
        assert report.measured_peak_bytes is not None and report.measured_peak_bytes <= budget
        assert sorted(sink) == sorted(expected)
        for name, value in expected.items():
            assert sink[name].tobytes() == value.tobytes(), name


def test_workers_need_no_more_budget_than_one(llama_path: Path, tmp_path: Path) -> None:
    one = plan(RECIPE, llama_path, budget=1024)
    two = plan(RECIPE, llama_path, budget=1024, workers=2)
    assert not two.fits and two.budget_message == one.budget_message
    dst = tmp_path / "out"
    with pytest.raises(BudgetError, match=r"memory budget of 1024 bytes .* is too small: binding"):
        convert(RECIPE, llama_path, dst, budget=1024, workers=2, progress=False)
    assert not dst.exists() and list(tmp_path.iterdir()) == []


def test_the_plan_reports_what_workers_may_hold(llama_path: Path) -> None:
    one, two = plan(RECIPE, llama_path), plan(RECIPE, llama_path, workers=2)
    assert one.parallel is None and one.worker_budget_bytes is None and one.in_flight_bytes == 0
    assert two.worker_budget_bytes == two.predicted_peak_bytes
    assert two.in_flight_bytes == two.predicted_peak_bytes - one.predicted_peak_bytes > 0
    summary = two.summary()
    assert summary["workers"] == 2 and summary["worker_budget"] == two.worker_budget_bytes
    assert one.summary()["worker_budget"] is None


def test_a_budget_only_the_in_order_run_fits_runs_in_order() -> None:
    source = DictSource({"w": np.arange(2048, dtype=np.float32).reshape(64, 32)})
    peak = plan(_reuse_output, source).predicted_peak_bytes
    two = plan(_reuse_output, source, budget=peak, workers=2)
    assert two.parallel is not None and two.parallel.peak_bytes > peak
    assert two.fits and two.worker_budget_bytes is None and two.predicted_peak_bytes == peak
    sink: dict[str, np.ndarray] = {}
    report = convert(_reuse_output, source, sink, budget=peak, workers=2, progress=False)
    assert report.measured_peak_bytes == peak
    w = np.arange(2048, dtype=np.float32).reshape(64, 32)
    np.testing.assert_array_equal(sink["u"], w.T * 3)


def test_traced_numpy_kernels_run_side_by_side(llama_path: Path, tmp_path: Path) -> None:
    spec = slow_spec(tmp_path, 0.0)
    the_plan = plan(spec, llama_path, workers=2)
    assert the_plan.parallel is not None and not any(the_plan.parallel.alone)
    one, two = tmp_path / "one.safetensors", tmp_path / "two.safetensors"
    convert(spec, llama_path, one, progress=False)
    convert(spec, llama_path, two, workers=2, progress=False)
    assert one.read_bytes() == two.read_bytes()


class _FailingSink(DictSink):
    """Refuses one tensor, as a full disk would."""

    def write(self, name: str, array: Any) -> None:
        if name.endswith("layers.1.mlp.down_proj.weight"):
            raise CheckpointError(f"{self.path}: no space left writing {name}")
        super().write(name, array)


def test_a_failing_write_stops_the_workers(llama_path: Path) -> None:
    infos = [TensorInfo.of(i.name, i.shape, i.dtype) for i in plan(RECIPE, llama_path).outputs]
    sink = _FailingSink(infos)
    with pytest.raises(CheckpointError, match=r"no space left writing model\.layers\.1\.mlp"):
        convert(RECIPE, llama_path, sink, workers=2, progress=False)
    assert sink.tensors == {}  # aborted: nothing is kept


def test_the_cli_runs_workers(llama_path: Path, tmp_path: Path, capsys: Any) -> None:
    one, two = tmp_path / "one.safetensors", tmp_path / "two.safetensors"
    assert main(["convert", RECIPE, str(llama_path), str(one), "--no-progress", "--json"]) == 0
    capsys.readouterr()
    code = main(
        ["convert", RECIPE, str(llama_path), str(two), "--workers", "2", "--no-progress", "--json"]
    )
    assert code == 0 and one.read_bytes() == two.read_bytes()
    report = json.loads(capsys.readouterr().out)
    assert report["workers"] == 2 and report["measured_peak_bytes"] <= report["worker_budget"]


def test_blocks_of_rows_run_on_workers_within_the_budget() -> None:
    rng = np.random.default_rng(3)
    tensors = {
        "embed": rng.standard_normal((1024, 256), dtype=np.float32),
        "w": rng.standard_normal((64, 64), dtype=np.float32),
    }
    budget = 512 * 1024  # half the embedding: it goes in blocks of rows
    one: dict[str, np.ndarray] = {}
    two: dict[str, np.ndarray] = {}
    convert("cast:float16", DictSource(tensors), one, budget=budget, progress=False)
    report = convert(
        "cast:float16", DictSource(tensors), two, budget=budget, workers=2, progress=False
    )
    the_plan = report.plan
    assert the_plan.chunked_outputs == ("embed",)
    assert the_plan.parallel is not None and not any(the_plan.parallel.alone)
    assert report.measured_peak_bytes is not None and report.measured_peak_bytes <= budget
    assert sorted(one) == sorted(two)
    assert all(one[name].tobytes() == two[name].tobytes() for name in one)
