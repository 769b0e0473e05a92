"""Granite (granite) and Granite MoE (granitemoe): llama's rotary permutation, the four scales
and their defaults, head_dim ignored, the stacked experts' fused input_linear split into gate
and up, the shared expert, metadata read back with gguf-py, a mixture and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_phi import (
    ABSENT,
    config_of,
    converted,
    fields_of,
    gguf_file,
    model_of,
    random_weights,
    write_gpt2_tokenizer,
    write_model,
)
from hf_fixtures import write_checkpoint

from tests.targets.llamacpp.checks import refused

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _permuted(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's rotary permutation of a q/k projection, written out."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_granite_tensors_as_llama(tmp_path: Path) -> None:
    folder, weights = write_model(tmp_path / "m", model_of("granite", tied=True))
    out = converted(folder)
    assert "output.weight" not in out
    q = _f32(weights["model.layers.1.self_attn.q_proj.weight"])
    np.testing.assert_array_equal(out["blk.1.attn_q.weight"], _permuted(q, 4))
    k = _f32(weights["model.layers.1.self_attn.k_proj.weight"])
    np.testing.assert_array_equal(out["blk.1.attn_k.weight"], _permuted(k, 2))
    up = _f32(weights["model.layers.0.mlp.up_proj.weight"])
    np.testing.assert_array_equal(out["blk.0.ffn_up.weight"], up)


def _read(tmp_path: Path, kind: str, out_type: str, **changes: object) -> gguf.GGUFReader:
    folder = tmp_path / kind
    model = model_of(kind, vocab=write_gpt2_tokenizer(folder), **changes)  # type: ignore[arg-type]
    write_model(folder, model)
    return gguf_file(folder, out_type, pre="llama-bpe")


def test_granite_metadata_scales(tmp_path: Path) -> None:
    fields = fields_of(_read(tmp_path, "granite", "q8_0"))
    a = "granite."
    keys = [k for k in fields if k.startswith(a) or k == "general.file_type"]
    tail = ["vocab_size", "rope.dimension_count", "attention.scale", "embedding_scale"]
    tail += ["residual_scale", "logit_scale"]
    assert keys[-7:] == ["general.file_type", *(a + k for k in tail)]
    assert fields[a + "attention.scale"] == pytest.approx(0.015625)
    assert fields[a + "embedding_scale"] == pytest.approx(12.0)
    assert fields[a + "residual_scale"] == pytest.approx(0.22)
    assert fields[a + "logit_scale"] == pytest.approx(8.0)
    assert fields[a + "rope.freq_base"] == pytest.approx(1e7)
    assert fields["tokenizer.ggml.model"] == "gpt2"


def test_granite_defaults_head_dim_and_zero_scale(tmp_path: Path) -> None:
    """GraniteConfig's defaults (scales 1, eps 1e-6, theta 10000) where config.json has no
    value; a zero scale is not written; head_dim is ignored, as the converter ignores it."""
    extra = {"attention_multiplier": ABSENT, "embedding_multiplier": ABSENT, "head_dim": 16}
    extra.update(rms_norm_eps=ABSENT, rope_theta=ABSENT, residual_multiplier=0.0)
    fields = fields_of(_read(tmp_path, "granite", "f16", extra=extra))
    a = "granite."
    assert fields[a + "attention.scale"] == 1.0
    assert fields[a + "embedding_scale"] == 1.0
    assert a + "residual_scale" not in fields
    assert fields[a + "attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    assert fields[a + "rope.freq_base"] == 10000.0
    assert a + "attention.key_length" not in fields
    assert fields[a + "rope.dimension_count"] == 16


def test_granitemoe_experts_split_from_input_linear(tmp_path: Path) -> None:
    folder, weights = write_model(tmp_path / "m", model_of("granitemoe"))
    out = converted(folder)
    fused = _f32(weights["model.layers.1.block_sparse_moe.input_linear.weight"])
    np.testing.assert_array_equal(out["blk.1.ffn_gate_exps.weight"], fused[:, :96, :])
    np.testing.assert_array_equal(out["blk.1.ffn_up_exps.weight"], fused[:, 96:, :])
    down = _f32(weights["model.layers.1.block_sparse_moe.output_linear.weight"])
    np.testing.assert_array_equal(out["blk.1.ffn_down_exps.weight"], down)
    names = list(out)
    # the split comes in gate, up order at input_linear's place
    assert names.index("blk.0.ffn_gate_exps.weight") + 1 == names.index("blk.0.ffn_up_exps.weight")
    assert out["blk.0.ffn_gate_inp.weight"].shape == (4, 64)


def test_granitemoe_shared_expert_and_metadata(tmp_path: Path) -> None:
    reader = _read(tmp_path, "granitemoe", "bf16", shared=48)
    fields = fields_of(reader)
    a = "granitemoe."
    assert fields[a + "expert_count"] == 4
    assert fields[a + "expert_used_count"] == 2
    assert fields[a + "expert_shared_feed_forward_length"] == 48
    assert list(fields).index(a + "logit_scale") + 1 == list(fields).index(
        a + "expert_shared_feed_forward_length"
    )
    tensors = {t.name: t for t in reader.tensors}
    assert tensors["blk.0.ffn_gate_inp.weight"].tensor_type.name == "F32"
    assert tensors["blk.0.ffn_gate_exps.weight"].tensor_type.name == "BF16"
    assert tuple(int(n) for n in tensors["blk.0.ffn_gate_shexp.weight"].shape) == (64, 48)
    assert tuple(int(n) for n in tensors["blk.0.ffn_down_shexp.weight"].shape) == (48, 64)


def test_granitemoe_shared_split_values(tmp_path: Path) -> None:
    folder, weights = write_model(tmp_path / "m", model_of("granitemoe", shared=48))
    out = converted(folder)
    fused = _f32(weights["model.layers.0.shared_mlp.input_linear.weight"])
    np.testing.assert_array_equal(out["blk.0.ffn_gate_shexp.weight"], fused[:48])
    np.testing.assert_array_equal(out["blk.0.ffn_up_shexp.weight"], fused[48:])


def test_granitemoe_q4_k_m_mixture(tmp_path: Path) -> None:
    reader = _read(tmp_path, "granitemoe", "q4_k_m", hidden=256, intermediate=256)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.ffn_gate_inp.weight"] == "F32"
    assert types["blk.0.ffn_gate_exps.weight"] == "Q4_K"
    assert types["blk.0.attn_q.weight"] == "Q4_K"


def test_granitemoe_expert_count_that_disagrees(tmp_path: Path) -> None:
    model = model_of("granitemoe")
    config = {**config_of(model), "num_local_experts": 8}
    folder = write_checkpoint(tmp_path / "m", random_weights(model), config)
    refused(tmp_path, folder, "input_linear.weight", "num_local_experts=8")


def test_granitemoe_input_linear_rows_that_disagree(tmp_path: Path) -> None:
    model = model_of("granitemoe")
    config = {**config_of(model), "intermediate_size": 64}
    folder = write_checkpoint(tmp_path / "m", random_weights(model), config)
    refused(tmp_path, folder, "input_linear.weight", "intermediate_size=64")


def test_granite_llama3_rope_isrefused(tmp_path: Path) -> None:
    rope = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 1024}
    model = model_of("granite", extra={"rope_scaling": rope})
    folder = tmp_path / "granite"
    write_gpt2_tokenizer(folder, model.vocab)
    write_model(folder, model)
    refused(tmp_path, folder, "'llama3'", "granite")
