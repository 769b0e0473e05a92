"""GPTQ checkpoints dequantized in the traced program: every value against the published
formula in numpy (plain and act-order groups, 2, 4 and 8 bits, both checkpoint formats), the
same bytes in blocks of output rows under a budget below one weight, through cast and gguf,
and every bad input refused in one line before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams
from lazyparams.errors import CheckpointError
from lazyparams.io import open_source
from tests.targets.dequantize.gptq_fixtures import gptq_model
from tests.targets.llamacpp.hf_fixtures import write_checkpoint

Q = "model.layers.0.self_attn.q_proj.weight"


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    with open_source(folder) as source:
        return {name: source.load(name) for name in source.names()}


def expected(layer: dict[str, np.ndarray]) -> np.ndarray:
    """float32(scales[g_idx]) * float32(q - zeros[g_idx]), transposed to [out, in]."""
    g = layer["g_idx"]
    scales = layer["scales"][g].astype(np.float32)
    return (scales * (layer["q"] - layer["zeros"][g]).astype(np.float32)).T


@pytest.mark.parametrize(
    ("bits", "act_order", "v2"),
    [(4, False, False), (4, True, False), (8, False, True), (2, True, True)],
)
def test_every_weight_is_the_formula_s(
    tmp_path: Path, bits: int, act_order: bool, v2: bool
) -> None:
    src, layers = gptq_model(tmp_path / "gptq", bits, act_order=act_order, v2=v2)
    out: dict[str, Any] = {}
    lazyparams.convert("cast:float32", src, out, progress=False)
    for name, layer in layers.items():
        assert out[name].dtype == np.float32
        np.testing.assert_array_equal(out[name], expected(layer))
    assert not any(n.endswith((".qweight", ".qzeros", ".scales", ".g_idx")) for n in out)
    assert set(list(out)[-len(layers) :]) == set(layers)  # appended, as the converter does


def test_a_budget_below_one_weight_gives_the_same_bytes(tmp_path: Path) -> None:
    src, _ = gptq_model(tmp_path / "gptq", act_order=True)
    whole: dict[str, Any] = {}
    lazyparams.convert("cast:bfloat16", src, whole, progress=False)
    weight = 4 * int(np.prod(whole[Q].shape))  # one dequantized float32 weight
    plan = lazyparams.plan("cast:bfloat16", src, budget=weight // 2)
    assert plan.fits, plan.budget_message
    blocks: dict[str, Any] = {}
    report = lazyparams.convert("cast:bfloat16", src, blocks, budget=weight // 2, progress=False)
    assert report.measured_peak_bytes == plan.predicted_peak_bytes <= weight // 2
    for name in whole:
        np.testing.assert_array_equal(blocks[name], whole[name])


def test_a_folder_written_from_gptq_claims_no_quantization(tmp_path: Path) -> None:
    src, _ = gptq_model(tmp_path / "gptq")
    lazyparams.convert("cast:bfloat16", src, tmp_path / "out", progress=False)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "quantization_config" not in config
    assert _tensors(tmp_path / "out")[Q].dtype.name == "bfloat16"


def _rewrite(
    folder: Path, drop: str = "", change: dict[str, Any] | None = None, **quant: Any
) -> Path:
    tensors = _tensors(folder)
    tensors = {n: v for n, v in tensors.items() if not (drop and n == drop)}
    tensors.update(change or {})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"].update(quant)
    bad = folder.parent / "bad"
    return write_checkpoint(bad, tensors, config)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ({"bits": 3}, r"quantization_config\.bits: 3 is not supported; expected one of 2, 4, 8"),
        (
            {"checkpoint_format": "marlin"},
            r"checkpoint_format: 'marlin' is not supported; expected one of gptq, gptq_v2",
        ),
        (
            {"drop": "model.layers.0.self_attn.q_proj.qzeros"},
            r"GPTQ layer 'model\.layers\.0\.self_attn\.q_proj' has no tensor "
            r"'model\.layers\.0\.self_attn\.q_proj\.qzeros'",
        ),
        (
            {"change": {"model.layers.0.self_attn.q_proj.g_idx": np.zeros(5, np.int32)}},
            r"tensor 'model\.layers\.0\.self_attn\.q_proj\.g_idx' has shape \[5\]; expected \[64\]",
        ),
        (
            {"change": {"model.layers.0.self_attn.k_proj.scales": np.zeros((2, 3), np.float16)}},
            r"'model\.layers\.0\.self_attn\.k_proj\.scales' has shape \[2, 3\]; expected \[2, 32\]",
        ),
        (
            {"drop": "model.layers.0.self_attn.q_proj.qweight"},
            r"tensor 'model\.layers\.0\.self_attn\.q_proj\.(g_idx|qzeros|scales)' belongs to no "
            r"GPTQ layer",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(
    tmp_path: Path, how: dict[str, Any], message: str
) -> None:
    src, _ = gptq_model(tmp_path / "gptq")
    drop, change = how.pop("drop", ""), how.pop("change", None)
    bad = _rewrite(src, drop, change, **how)
    with pytest.raises(CheckpointError, match=message):
        lazyparams.convert("cast:bfloat16", bad, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
