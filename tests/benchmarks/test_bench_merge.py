"""The merge benchmark's own pieces: the generated checkpoints, the configurations, the output
comparisons, the measuring of a command (without a cgroup) and the RESULTS.md section."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import bench_merge
from lazyparams.io.detect import open_source
from lazyparams.io.merge_config import read_merge_config

TINY = bench_merge.SHAPES["tiny"]


@pytest.fixture(scope="module", name="models")
def models_fixture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    models, note = bench_merge.make_models(tmp_path_factory.mktemp("models"), TINY)
    assert note.startswith("the three llama-tiny checkpoints: written in")
    return models


def test_a_checkpoint_has_every_tensor_of_its_shape_in_bfloat16(models: dict[str, Path]) -> None:
    source = open_source(models["base"])
    try:
        assert source.names() == [name for name, _ in TINY.tensors()]
        for name, shape in TINY.tensors():
            info = source.info(name)
            assert (tuple(info.shape), str(info.dtype)) == (shape, "bfloat16")
        norm = np.asarray(source.load("model.norm.weight"), np.float32)
        assert ((norm >= 1.0) & (norm < 1.06)).all()
        weight = np.abs(np.asarray(source.load("lm_head.weight"), np.float32))
        assert ((weight >= 2.0**-7) & (weight < 2.0**-5)).all()
    finally:
        source.close()
    config = json.loads((models["base"] / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["hidden_size"], config["num_key_value_heads"]) == (TINY.hidden, TINY.kv_heads)


def test_the_models_differ_and_a_rewrite_is_skipped(models: dict[str, Path]) -> None:
    tensors = {role: bench_merge.read_folder(path) for role, path in models.items()}
    name = "model.layers.0.mlp.up_proj.weight"
    assert not np.array_equal(tensors["a"][name].array(), tensors["b"][name].array())
    before = (models["a"] / "model.safetensors").stat().st_mtime_ns
    bench_merge.write_checkpoint(models["a"], TINY, bench_merge.MODEL_SEEDS["a"])
    assert (models["a"] / "model.safetensors").stat().st_mtime_ns == before


def test_shards_past_the_shard_size_get_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_merge, "SHARD_BYTES", TINY.nbytes // 3)
    folder = bench_merge.write_checkpoint(tmp_path / "sharded", TINY, 0)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 3
    source = open_source(folder)
    try:
        assert len(source.names()) == len(TINY.tensors())
    finally:
        source.close()


def test_the_tokenizer_loads_and_maps_words_to_their_ids(models: dict[str, Path]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(models["base"] / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == TINY.vocab
    assert tokenizer.encode("t5 t7 nope").ids == [5, 7, 0]


@pytest.mark.parametrize("method", bench_merge.METHODS)
def test_each_configuration_reads_as_mergekit_yaml(
    method: str, models: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / f"{method}.yml"
    path.write_text(bench_merge.merge_config(method, models))
    config = read_merge_config(path)
    assert (config.method, config.dtype) == (method, "bfloat16")
    assert {str(folder) for folder in config.folders.values()} <= {str(p) for p in models.values()}
    assert (config.base is None) == (method == "linear")


def test_a_lazyparams_linear_merge_passes_the_spot_check(
    models: dict[str, Path], tmp_path: Path
) -> None:
    config = tmp_path / "linear.yml"
    config.write_text(bench_merge.merge_config("linear", models))
    out = tmp_path / "out"
    command = bench_merge.lazyparams_command("merge", str(config), str(out), "--no-progress")
    subprocess.run(command, check=True, capture_output=True)
    names = [name for name, _ in TINY.tensors()]
    problems, summary = bench_merge.spot_check(out, models, TINY, names)
    assert problems == [] and f"{len(names)} tensors recomputed" in summary, summary
    assert bench_merge.compare_folders(out, out).summary() == "identical"
    (out / "model.safetensors").unlink()
    problems, _ = bench_merge.spot_check(out, models, TINY, names)
    assert problems == [f"{len(names)} tensors missing ({', '.join(sorted(names)[:3])})"]


def test_a_changed_value_is_counted_against_the_other_output(
    models: dict[str, Path], tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    data = bytearray((models["a"] / "model.safetensors").read_bytes())
    norm = bench_merge.read_folder(models["a"])["model.norm.weight"]
    data[norm.offset : norm.offset + 2] = np.array([0x4000], np.uint16).tobytes()  # 2.0
    (copy / "model.safetensors").write_bytes(bytes(data))
    agreement = bench_merge.compare_folders(copy, models["a"])
    assert agreement.elements == TINY.nbytes // 2 and agreement.equal == agreement.elements - 1
    first = float(bench_merge.as_float(np.asarray(norm.array()[:1]), "BF16")[0])
    assert agreement.max_abs == pytest.approx(2.0 - first)
    assert agreement.summary().startswith(f"1 of {agreement.elements} values differ")


def test_a_command_is_measured_without_a_cgroup(tmp_path: Path) -> None:
    grow = (
        "import time; b = bytearray(96 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(0.3)"
    )
    run = bench_merge.measure("grow", [sys.executable, "-c", grow], tmp_path, None, poll=0.02)
    assert run.ok and run.wall_s is not None and run.cgroup_peak is None
    assert run.rss_peak is not None and run.rss_peak >= 96 << 20
    assert run.anon_peak is not None and run.anon_peak >= 96 << 20
    failed = bench_merge.measure(
        "fail", [sys.executable, "-c", "raise SystemExit('no luck')"], tmp_path, None
    )
    assert (failed.ok, failed.note) == (False, "exit 1: no luck")


def test_the_memory_cgroup_is_read_from_proc(tmp_path: Path) -> None:
    listing = tmp_path / "cgroup"
    listing.write_text("5:devices:/\n4:memory:/jobs/one\n0::/\n")
    assert bench_merge.own_memory_cgroup(listing) == bench_merge.CGROUP_V1 / "jobs" / "one"
    listing.write_text("0::/\n")
    assert bench_merge.own_memory_cgroup(listing) is None
    assert bench_merge.usable_parent(None) == "no cgroup v1 memory controller"
    assert "is no cgroup v1 memory group" in str(bench_merge.usable_parent(tmp_path))


def test_the_results_section_is_replaced_not_appended(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\ntext\n")
    bench_merge.update_results("first figures\n", results)
    bench_merge.update_results("second figures\n", results)
    text = results.read_text()
    assert text.count("## Merges") == 1 and "first" not in text and "second figures" in text
    assert text.startswith("# Benchmark results\n\n## Other\n\ntext\n")


def test_the_shown_command_hides_paths_and_where_the_report_goes() -> None:
    words = ["--seven-b", "--out", "x.md", "--results", "--out=y.md", "--scratch", "/a/b"]
    words += ["--ref-python=/opt/py", "--repeat", "3"]
    assert bench_merge.shown_command(words, {"BENCH_MERGEKIT": "/opt/mk", "HOME": "/"}) == (
        "BENCH_MERGEKIT=MERGEKIT_YAML python benchmarks/bench_merge.py --seven-b --results "
        "--scratch DIR --ref-python REF_PYTHON --repeat 3"
    )
