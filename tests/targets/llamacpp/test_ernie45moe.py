"""ERNIE-4.5-MoE (ernie4_5-moe): tensors as llama.cpp's converter writes them (dense lead,
experts stacked gate, up, down, shared experts, F32 router and score-correction bias, the
multi-token-prediction tensors left out), its metadata and sentencepiece vocabulary read back
with gguf-py, and the refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_moe import EXPERTS, LAYERS, ernie45moe_layout, random_tensors
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_sentencepiece_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")


def _folder(tmp_path: Path, mtp: bool = False, **config: Any) -> tuple[Path, dict[str, Any]]:
    base, shapes = ernie45moe_layout(mtp)
    weights = random_tensors(shapes)
    return write_checkpoint(tmp_path / "ernie", weights, {**base, **config}, shards=3), weights


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_experts_in_gate_up_down_order(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path, mtp=True)
    out = _convert(folder)
    names = list(out)
    assert "output.weight" not in out  # tied embeddings
    assert not any("mtp" in name for name in names)
    assert "blk.0.ffn_gate.weight" in out and "blk.0.ffn_gate_exps.weight" not in out
    for layer in (1, 2):
        stacks = [names.index(f"blk.{layer}.ffn_{p}_exps.weight") for p in ("gate", "up", "down")]
        assert stacks == list(range(stacks[0], stacks[0] + 3))
        for x in range(EXPERTS):
            up = weights[f"model.layers.{layer}.mlp.experts.{x}.up_proj.weight"]
            np.testing.assert_array_equal(out[f"blk.{layer}.ffn_up_exps.weight"][x], up)
        bias = out[f"blk.{layer}.exp_probs_b.bias"]
        assert bias.shape == (1, EXPERTS) and bias.dtype == np.float32
    q = weights["model.layers.1.self_attn.q_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.1.attn_q.weight"], q)  # no rotary permutation
    quantized = _convert(folder, "gguf:q8_0")
    assert quantized["blk.2.ffn_gate_inp.weight"].dtype == np.float32
    assert quantized["blk.2.ffn_down_shexp.weight"].dtype == np.uint8
    mixture = _convert(folder, "gguf:q4_k_m")
    assert mixture["blk.1.ffn_down_exps.weight"].dtype == np.uint8


def test_metadata_and_vocabulary(tmp_path: Path) -> None:
    pytest.importorskip("sentencepiece", reason="the llamacpp extra is not installed")
    folder, _ = _folder(tmp_path)
    write_sentencepiece_tokenizer(folder, 400)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["add_prefix_space"] = True
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    dst = tmp_path / "ernie.gguf"
    lazyparams.convert(GGUFTarget("bf16"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    a = "ernie4_5-moe."
    expected = {
        "block_count": LAYERS,
        "feed_forward_length": 160,
        "expert_count": EXPERTS,
        "expert_used_count": 2,
        "interleave_moe_layer_step": 1,
        "leading_dense_block_count": 1,
        "expert_feed_forward_length": 32,
        "expert_shared_count": 2,
        "expert_shared_feed_forward_length": 160 // 2,  # intermediate_size / kv heads
    }
    for key, value in expected.items():
        assert fields[a + key] == value, key
    keys = [k for k in fields if k.startswith(a)]
    assert keys[-1] == a + "expert_shared_feed_forward_length"
    assert fields["tokenizer.ggml.model"] == "llama"
    # the converter adds add_prefix_space after the whole sentencepiece vocabulary
    assert list(fields)[-1] == "tokenizer.ggml.add_space_prefix"
    assert fields["tokenizer.ggml.add_space_prefix"] is True


def test_layer_pattern_from_the_config(tmp_path: Path) -> None:
    """moe_layer_end_index makes the last layer dense: its experts are refused by name."""
    folder, _ = _folder(tmp_path, moe_layer_end_index=1)
    with pytest.raises(LazyParamsError, match=r"makes layer 2 a dense layer"):
        _convert(folder)
    folder, _ = _folder(tmp_path / "count", moe_num_experts=8)
    with pytest.raises(LazyParamsError, match=r"expected experts 0\.\.7"):
        _convert(folder)
