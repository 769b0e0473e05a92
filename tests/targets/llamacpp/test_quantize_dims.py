"""A llama-quantize type writes each tensor with the dims llama-quantize keeps (ggml_n_dims:
trailing GGUF dims of 1 dropped), the converter's types as the converter writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import lazyparams
from tests.targets.llamacpp.hf_fixtures import SHAPES, config_of, random_weights, write_checkpoint

GATE = "blk.0.ffn_gate_inp_shexp.weight"


def _convert(folder: Path, spec: str) -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_the_shared_expert_gate_is_one_dim_after_llama_quantize_only(tmp_path: Path) -> None:
    shape = SHAPES["qwen2_moe"]
    weights = random_weights(shape)
    folder = write_checkpoint(tmp_path / "m", weights, config_of(shape))
    gate = weights["model.layers.0.mlp.shared_expert_gate.weight"]
    assert gate.shape == (1, shape.hidden)
    mixture = _convert(folder, "gguf:Q4_K_M")[GATE]
    assert mixture.shape == (shape.hidden,) and mixture.dtype == np.float32
    np.testing.assert_array_equal(mixture, gate.astype(np.float32).reshape(-1))
    assert _convert(folder, "gguf:q8_0")[GATE].shape == (1, shape.hidden)
