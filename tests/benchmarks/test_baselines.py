"""Smoke tests of the benchmark baselines (eager numpy, TVM's lazy pipeline) and the RSS meter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from benchmarks import rss
from benchmarks.baseline_eager import (
    INDEX_NAME,
    differences,
    load_checkpoint,
    make_checkpoint,
    plan_outputs,
    read_weight_map,
    run_eager,
)
from benchmarks.workloads import llama_inputs
from lazyparams.errors import CheckpointError, ConvertError, LazyParamsError

LAYERS, D, F = 2, 8, 12


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("src"), LAYERS, D, F, shards=2, seed=3)


@pytest.fixture(scope="module")
def eager_out(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_eager(source, tmp_path_factory.mktemp("eager"))


def expected_outputs() -> dict[str, np.ndarray]:
    """The transform written out by hand on the workload's own inputs."""
    values = iter(llama_inputs(LAYERS, D, F, seed=3))
    out = {}
    for i in range(LAYERS):
        q, k, v, o, gate, up, down = (next(values) for _ in range(7))
        prefix = f"model.layers.{i}"
        out[f"{prefix}.self_attn.qkv_proj.weight"] = np.concatenate([q, k, v]).T
        out[f"{prefix}.self_attn.o_proj.weight"] = o.T
        out[f"{prefix}.mlp.gate_up_proj.weight"] = np.concatenate([gate, up]).T
        out[f"{prefix}.mlp.down_proj.weight"] = down.T
    return {name: value.astype(np.float16) for name, value in out.items()}


def test_checkpoint_is_sharded_by_layer_with_an_index(source: Path) -> None:
    index = json.loads((source / INDEX_NAME).read_text())
    files = sorted(set(index["weight_map"].values()))
    assert files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    first = load_file(str(source / files[0]))
    assert sorted(first) == sorted(n for n in index["weight_map"] if n.startswith("model.layers.0"))
    assert index["metadata"]["total_size"] == sum(
        a.nbytes for a in load_checkpoint(source).values()
    )


def test_eager_output_is_the_transform(eager_out: Path) -> None:
    got = load_checkpoint(eager_out)
    want = expected_outputs()
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].dtype == np.float16 and got[name].shape == value.shape
        assert got[name].tobytes() == value.tobytes(), name


def test_eager_output_is_sharded_like_the_input(eager_out: Path) -> None:
    weight_map, index_name = read_weight_map(eager_out)
    assert index_name == INDEX_NAME
    assert weight_map["model.layers.0.mlp.down_proj.weight"] == "model-00001-of-00002.safetensors"
    assert weight_map["model.layers.1.self_attn.qkv_proj.weight"] == (
        "model-00002-of-00002.safetensors"
    )


def test_single_file_without_index(tmp_path: Path) -> None:
    tensors = load_checkpoint(make_checkpoint(tmp_path / "sharded", 1, D, F, shards=1))
    save_file(tensors, str(tmp_path / "model.safetensors"))
    out = run_eager(tmp_path, tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]
    assert len(load_file(str(out / "model.safetensors"))) == 4


def test_differences_names_the_changed_tensor(eager_out: Path, tmp_path: Path) -> None:
    assert differences(eager_out, eager_out) == []
    tensors = load_checkpoint(eager_out)
    tensors["model.layers.1.mlp.down_proj.weight"][0, 0] += 1
    del tensors["model.layers.0.self_attn.o_proj.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    found = differences(eager_out, tmp_path)
    assert found == [
        f"model.layers.0.self_attn.o_proj.weight: only in {eager_out}",
        "model.layers.1.mlp.down_proj.weight: same dtype and shape, different bytes",
    ]


def test_an_incomplete_layer_is_refused(source: Path) -> None:
    weight_map, _ = read_weight_map(source)
    del weight_map["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ConvertError, match=r"expected the 14 weights .* 'model.layers.1.mlp.up"):
        plan_outputs(weight_map)


def test_a_folder_without_a_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        CheckpointError, match=r"expected an index or one \.safetensors file, got 0"
    ):
        read_weight_map(tmp_path)


def test_measure_sees_a_64_mib_allocation() -> None:
    wall, peak = rss.measure("numpy:ones", 8 << 20)  # 8 Mi float64, every page written
    assert 0 <= wall < 5
    # a few pages of the baseline may be freed during the call, so allow a little under 64 MiB
    assert 62 << 20 <= peak < 80 << 20


def test_measure_takes_an_importable_function(
    source: Path, eager_out: Path, tmp_path: Path
) -> None:
    result = rss.measure(run_eager, str(source), str(tmp_path / "out"))
    assert result.peak_rss_bytes > 0 and result.wall_s > 0
    assert differences(eager_out, tmp_path / "out") == []


def test_measure_refuses_what_the_child_cannot_import() -> None:
    with pytest.raises(LazyParamsError, match="expected a function importable by name"):
        rss.measure(lambda: None)
    with pytest.raises(LazyParamsError, match="expected a target 'module:function'"):
        rss.measure("numpy.ones")


def test_measure_reports_a_failing_call() -> None:
    with pytest.raises(LazyParamsError, match="expected exit code 0, got 1"):
        rss.measure("benchmarks.baseline_eager:run_eager", "/nonexistent", "/nonexistent-out")


# -- TVM's lazy pipeline, where apache-tvm is installed ---------------------------------------


def test_tvm_pipeline_matches_eager_byte_for_byte(
    source: Path, eager_out: Path, tmp_path: Path
) -> None:
    pytest.importorskip("tvm")
    from benchmarks.baseline_tvm import run_tvm

    out = run_tvm(source, tmp_path)
    assert differences(eager_out, out) == []
    for file in eager_out.iterdir():
        assert (out / file.name).read_bytes() == file.read_bytes(), file.name


def test_tvm_lazy_function_loads_at_the_top_and_stores_every_output(source: Path) -> None:
    pytest.importorskip("tvm")
    from benchmarks.baseline_tvm import build_eager_module, input_order, make_lazy
    from lazyparams.io import open_source

    outputs = plan_outputs(read_weight_map(source)[0])
    with open_source(source) as src:
        infos = [src.info(name) for name in input_order(outputs)]
    text = make_lazy(build_eager_module(infos, outputs)).script()
    lines = [line.strip() for line in text.splitlines() if "call_packed" in line]
    gets = [i for i, line in enumerate(lines) if '"get_item"' in line]
    assert gets == list(range(7 * LAYERS))
    assert sum('"set_item"' in line for line in lines) == 4 * LAYERS
    assert "main_transform_params()" in text
