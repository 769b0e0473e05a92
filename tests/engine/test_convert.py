"""`convert`: streaming a checkpoint through the lazy function into every kind of destination."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert, plan
from lazyparams.engine.executor import find_executor
from lazyparams.engine.journal import work_dir
from lazyparams.errors import ConvertError
from lazyparams.io import DictSink, DictSource, SafetensorsSink, TensorInfo
from tests.engine.helpers import eager_fuse_cast, read_all, small_llama, tree_bytes

RECIPE = "fuse-qkv+cast:float16"


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


@pytest.fixture(scope="module", name="expected")
def expected_fixture(llama_path: Path) -> dict[str, np.ndarray]:
    return eager_fuse_cast(read_all(llama_path))


def assert_equal_tensors(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_sharded_safetensors_in_and_out_equal_the_eager_result(
    llama_path: Path, expected: dict[str, np.ndarray], tmp_path: Path
) -> None:
    dst = tmp_path / "out"
    report = convert(RECIPE, llama_path, dst, shard_size="32KiB", progress=False)
    assert_equal_tensors(read_all(dst), expected)
    names = sorted(p.name for p in dst.iterdir())
    assert names == sorted(Path(f).name for f in report.files)
    assert "model.safetensors.index.json" in names and len(names) > 2
    assert not work_dir(dst).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_file_destinations_single_and_sharded(
    llama_path: Path, expected: dict[str, np.ndarray], tmp_path: Path
) -> None:
    single = tmp_path / "one.safetensors"
    report = convert(RECIPE, llama_path, single, progress=False)
    assert report.files == (str(single),)
    assert_equal_tensors(read_all(single), expected)
    sharded = tmp_path / "split" / "model.safetensors"
    report = convert(RECIPE, llama_path, sharded, shard_size=40_000, progress=False)
    index = tmp_path / "split" / "model.safetensors.index.json"
    assert report.files[-1] == str(index) and len(report.files) > 2
    assert_equal_tensors(read_all(index), expected)
    assert not sharded.exists()  # the shards carry numbered names beside it


def test_the_output_is_byte_identical_to_the_io_writer(llama_path: Path, tmp_path: Path) -> None:
    dst = tmp_path / "engine"
    convert(RECIPE, llama_path, dst, shard_size=50_000, progress=False)
    tensors = read_all(dst / "model.safetensors.index.json")
    outputs = plan(RECIPE, llama_path).outputs
    reference = tmp_path / "reference"
    with SafetensorsSink(reference, outputs, max_shard_size=50_000) as sink:
        for info in outputs:
            sink.write(info.name, tensors[info.name])
    assert tree_bytes(dst) == tree_bytes(reference)


@pytest.mark.parametrize(
    ("name", "format"), [("out.npz", None), ("out.gguf", None), ("npy", "npy")]
)
def test_other_formats(
    llama_path: Path, expected: dict[str, np.ndarray], tmp_path: Path, name: str, format: str | None
) -> None:
    dst = tmp_path / name
    report = convert(RECIPE, llama_path, dst, format=format, progress=False)
    assert report.files == (str(dst),)
    assert_equal_tensors(read_all(dst), expected)


def test_a_dict_receives_the_outputs(llama_path: Path, expected: dict[str, np.ndarray]) -> None:
    out: dict[str, np.ndarray] = {}
    report = convert(RECIPE, llama_path, out, progress=False)
    assert_equal_tensors(out, expected)
    assert report.destination == "dict" and report.files == ()


def test_a_sink_object_must_declare_the_outputs(
    llama_path: Path, expected: dict[str, np.ndarray]
) -> None:
    sink = DictSink(plan(RECIPE, llama_path).outputs)
    convert(RECIPE, llama_path, sink, progress=False)
    assert_equal_tensors(sink.tensors, expected)
    wrong = DictSink([TensorInfo.of("lm_head.weight", (1,), "float16")])
    with pytest.raises(ConvertError, match="sink DictSink: expected it to declare tensor"):
        convert(RECIPE, llama_path, wrong, progress=False)
    with pytest.raises(ConvertError, match="format: applies to a destination path, got a dict"):
        convert(RECIPE, llama_path, {}, format="npz")
    with pytest.raises(ConvertError, match="expected a destination path, dict or sink, got int"):
        convert(RECIPE, llama_path, 7)


def test_background_workers_write_the_same_bytes(llama_path: Path, tmp_path: Path) -> None:
    convert(RECIPE, llama_path, tmp_path / "one", shard_size=50_000, progress=False)
    report = convert(
        RECIPE, llama_path, tmp_path / "four", shard_size=50_000, progress=False, workers=4
    )
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "four")
    assert report.plan.workers == 4 and report.plan.in_flight_bytes > 0
    assert report.measured_peak_bytes is not None
    assert report.measured_peak_bytes <= report.predicted_peak_bytes


def test_the_report(llama_path: Path, tmp_path: Path) -> None:
    report = convert(RECIPE, llama_path, tmp_path / "out", progress=False)
    the_plan = report.plan
    assert report.tensors_read == len(the_plan.inputs) and report.bytes_read == the_plan.bytes_in
    assert report.tensors_written == len(the_plan.outputs)
    assert report.bytes_written == the_plan.bytes_out
    assert report.measured_peak_bytes == report.predicted_peak_bytes
    assert report.eager_peak_bytes == the_plan.eager_peak_bytes
    assert report.peak_rss_bytes is None or report.peak_rss_bytes >= 0
    assert report.wall_seconds > 0 and report.resumed_outputs == 0
    summary = json.loads(json.dumps(report.summary()))
    assert summary["tensors_written"] == report.tensors_written
    assert summary["destination"] == str(tmp_path / "out")


def test_progress_bars_go_to_stderr(
    llama_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convert(RECIPE, llama_path, tmp_path / "out", progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "read" in captured.err and "write" in captured.err and "KiB" in captured.err


def test_outputs_that_are_constants_or_inputs_passed_through(tmp_path: Path) -> None:
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3)}

    def transform(params: dict[str, object]) -> dict[str, object]:
        return {"same": params["a"], "const": np.ones(3, np.int32), "again": params["a"]}

    report = convert(transform, DictSource(tensors), tmp_path / "out.safetensors")
    got = read_all(tmp_path / "out.safetensors")
    np.testing.assert_array_equal(got["same"], tensors["a"])
    np.testing.assert_array_equal(got["again"], tensors["a"])
    np.testing.assert_array_equal(got["const"], np.ones(3, np.int32))
    assert report.tensors_read == 1


def test_an_executor_that_is_not_installed_is_named_with_what_to_install() -> None:
    with pytest.raises(ConvertError, match=r"no executor 'ray' is installed .*lazyparams\[dask\]"):
        find_executor("ray")


def test_the_dask_executor_is_found_by_its_entry_point() -> None:
    pytest.importorskip("distributed")
    from lazyparams.cluster import convert_on_cluster

    assert find_executor() is convert_on_cluster
