"""compressed-tensors' pack-quantized checkpoints dequantized in the traced program: every
value against the published formula (symmetric and with zero points, 4 and 8 bits), the same
bytes in blocks of rows under a budget below one weight, and bad input refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams
from lazyparams.errors import CheckpointError
from lazyparams.io import open_source
from tests.targets.dequantize.gptq_fixtures import pack_quantized_model
from tests.targets.llamacpp.hf_fixtures import write_checkpoint

W = "model.layers.0.mlp.down_proj.weight"


def expected(layer: dict[str, np.ndarray], group: int) -> np.ndarray:
    """float32(q - offset) * float32(scale), per row and group of inputs."""
    q = layer["q"]
    parts = q.reshape(q.shape[0], -1, group) - layer["offset"][..., None]
    scale = layer["weight_scale"].astype(np.float32)[..., None]
    return (parts.astype(np.float32) * scale).reshape(q.shape)


@pytest.mark.parametrize(("bits", "symmetric"), [(4, True), (4, False), (8, True), (8, False)])
def test_every_weight_is_the_formula_s(tmp_path: Path, bits: int, symmetric: bool) -> None:
    src, layers = pack_quantized_model(tmp_path / "m", bits, symmetric=symmetric)
    out: dict[str, Any] = {}
    lazyparams.convert("cast:float32", src, out, progress=False)
    for name, layer in layers.items():
        np.testing.assert_array_equal(out[name], expected(layer, 32))
    assert not any(n.endswith(("_packed", "_shape", "_zero_point", "_scale")) for n in out)


def test_a_budget_below_one_weight_gives_the_same_bytes(tmp_path: Path) -> None:
    src, _ = pack_quantized_model(tmp_path / "m", symmetric=False)
    whole: dict[str, Any] = {}
    lazyparams.convert("cast:bfloat16", src, whole, progress=False)
    budget = 4 * int(np.prod(whole[W].shape)) // 2
    blocks: dict[str, Any] = {}
    report = lazyparams.convert("cast:bfloat16", src, blocks, budget=budget, progress=False)
    assert report.measured_peak_bytes == report.plan.predicted_peak_bytes <= budget
    for name in whole:
        np.testing.assert_array_equal(blocks[name], whole[name])


def _bad(folder: Path, tensors: dict[str, Any], **weights: Any) -> Path:
    with open_source(folder) as source:
        found = {name: source.load(name) for name in source.names()}
    found = {n: v for n, v in found.items() if tensors.get(n, 0) is not None}
    found.update({n: v for n, v in tensors.items() if v is not None})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["weights"].update(weights)
    return write_checkpoint(folder.parent / "bad", found, config)


@pytest.mark.parametrize(
    ("tensors", "weights", "message"),
    [
        ({}, {"num_bits": 2}, r"type 'int' of 2 bits is not supported for pack-quantized"),
        ({}, {"strategy": "channel"}, r"strategy: 'channel' is not supported for pack-quantized"),
        (
            {W + "_scale": None},
            {},
            r"packed weight 'model\.layers\.0\.mlp\.down_proj' has no tensor "
            r"'model\.layers\.0\.mlp\.down_proj\.weight_scale'",
        ),
        (
            {W + "_scale": np.ones((64, 3), np.float16)},
            {},
            r"'model\.layers\.0\.mlp\.down_proj\.weight_scale' is float16\[64, 3\]; expected "
            r"\[64, 128 / 32\]",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(
    tmp_path: Path, tensors: dict[str, Any], weights: dict[str, Any], message: str
) -> None:
    src, _ = pack_quantized_model(tmp_path / "m")
    bad = _bad(src, tensors, **weights)
    with pytest.raises(CheckpointError, match=message):
        lazyparams.convert("cast:bfloat16", bad, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()
