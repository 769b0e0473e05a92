"""The benchmark suite's own pieces: the real layout's baselines, placing a predicted timeline on
the time axis, the results table and the RESULTS.md section."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import run_all, timeline
from benchmarks.baseline_eager import differences, read_weight_map
from benchmarks.real_layout import make_checkpoint, run_eager, steps
from benchmarks.rss import Measurement
from lazyparams import convert
from lazyparams.engine.demo import LlamaShape

SMALL = LlamaShape(layers=2, hidden=16, intermediate=24, vocab=40)


@pytest.fixture(scope="module", name="real")
def real_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_checkpoint(tmp_path_factory.mktemp("real") / "src", SMALL)


def test_the_real_layout_steps_follow_the_recipe(real: Path) -> None:
    weight_map, _ = read_weight_map(real)
    by_name = {step.name: step for step in steps(weight_map)}
    qkv = by_name["model.layers.1.self_attn.qkv_proj.weight"]
    assert qkv.members == tuple(f"model.layers.1.self_attn.{m}_proj.weight" for m in "qkv")
    assert qkv.transpose and by_name["lm_head.weight"].transpose
    assert not by_name["model.embed_tokens.weight"].transpose
    assert not by_name["model.norm.weight"].transpose
    assert "model.layers.0.mlp.up_proj.weight" not in by_name
    # embed, norm and lm_head; per layer two norms, qkv, o, gate_up and down
    assert len(by_name) == 3 + 2 * 6


def test_eager_and_lazyparams_write_the_same_real_layout(real: Path, tmp_path: Path) -> None:
    run_eager(real, tmp_path / "eager")
    (tmp_path / "lp").mkdir()
    convert(timeline.RECIPE, real, tmp_path / "lp" / "model.safetensors", progress=False)
    assert differences(tmp_path / "eager", tmp_path / "lp") == []


def test_tvm_writes_the_same_real_layout(real: Path, tmp_path: Path) -> None:
    pytest.importorskip("tvm")
    from benchmarks.real_layout_tvm import run_tvm

    run_eager(real, tmp_path / "eager")
    run_tvm(real, tmp_path / "tvm")
    assert differences(tmp_path / "eager", tmp_path / "tvm") == []


def test_a_timeline_is_placed_by_its_loads() -> None:
    # loads at bindings 1 and 3 began at 2 s and 4 s; the call ended at 6 s
    points = timeline.place([10, 20, 30, 40, 50], [1, 3], [2.0, 4.0], 6.0)
    assert points == [(2.0, 10), (2.0, 20), (3.0, 30), (4.0, 40), (5.0, 50)]


def _workload() -> run_all.Workload:
    workload = run_all.Workload("llama-like L=2", "llama", 2, weights=8 << 20)
    for key, wall, peak in (("eager", 1.0, 80), ("lazyparams-1", 2.0, 4), ("lazyparams-2", 1.0, 8)):
        workload.runs[key] = [Measurement(wall, peak << 20), Measurement(wall * 2, peak << 20)]
    workload.predicted = {"eager": 64 << 20, "lazyparams-1": 3 << 20, "lazyparams-2": 6 << 20}
    return workload


def test_the_table_gives_medians_and_ratios_to_two_workers() -> None:
    tools = [t for t in run_all.TOOLS if t.key != "tvm"]
    lines = run_all.table([_workload()], tools).splitlines()
    assert lines[2] == (
        "| llama-like L=2 (8 MiB) | eager numpy + safetensors | 1.50 [1.00-2.00] | 1.00 "
        "| 80.0 | 10.0 | 64.0 |"
    )
    assert "| 3.00 [2.00-4.00] | 2.00 | 4.0 | 0.5 | 3.0 |" in lines[3]
    assert run_all.speedup_line(_workload()) == (
        "llama-like L=2: wall time with 2 workers ÷ with 1 = 0.50 "
        "(median of 2 runs side by side: 0.50, 0.50)"
    )


def test_the_results_section_is_appended_then_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = tmp_path / "RESULTS.md"
    readme.write_text("# title\n\nfirst lines\n")
    monkeypatch.setattr(run_all, "RESULTS_MD", readme)
    run_all.update_results("table one\n", "python -m benchmarks.run_all")
    run_all.update_results("table two\n", "python -m benchmarks.run_all")
    text = readme.read_text()
    assert text.startswith("# title\n\nfirst lines\n\n## Benchmarks\n")
    assert "table two" in text and "table one" not in text
    assert text.count(run_all.MARKERS[0]) == 1 and "python -m benchmarks.run_all\n" in text
