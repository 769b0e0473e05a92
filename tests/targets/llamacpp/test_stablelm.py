"""StableLM (stablelm): tensors as llama.cpp's converter writes them (no rotary permutation,
LayerNorm weights and biases, q/k/v biases), the converter class's own metadata in its order,
parallel residual layers, transformers' defaults, a llama-quantize mixture and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_dense import ABSENT, converted, fields_of
from fixtures_dense2 import config_of, dense_model, gguf_file, random_weights, write_dense
from hf_fixtures import write_checkpoint

from tests.targets.llamacpp.checks import refused

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


def _layer_names(layer: int, parallel: bool = False) -> list[str]:
    names = ["attn_norm.weight", "attn_norm.bias", "attn_output.weight"]
    names += [f"attn_{p}.{k}" for p in "qkv" for k in ("weight", "bias")]
    names += ["ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
    if not parallel:
        names += ["ffn_norm.weight", "ffn_norm.bias"]
    return [f"blk.{layer}.{name}" for name in names]


def test_stablelm_tensors_keep_hugging_face_rows(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("stablelm"))
    out = converted(folder)
    expected = ["token_embd.weight", "output_norm.weight", "output_norm.bias", "output.weight"]
    for layer in range(3):
        expected += _layer_names(layer)
    assert sorted(out) == sorted(expected)
    for p in ("q", "k"):
        # llama.cpp runs StableLM with NeoX rotary on Hugging Face's layout: nothing permuted
        for kind in ("weight", "bias"):
            hf = weights[f"model.layers.2.self_attn.{p}_proj.{kind}"].astype(np.float32)
            np.testing.assert_array_equal(out[f"blk.2.attn_{p}.{kind}"], hf)
    norm_bias = weights["model.norm.bias"].astype(np.float32)
    np.testing.assert_array_equal(out["output_norm.bias"], norm_bias)


def test_stablelm_parallel_residual_without_biases(tmp_path: Path) -> None:
    extra = {"use_parallel_residual": True, "use_qkv_bias": False}
    model = dense_model("stablelm", tied=True, extra=extra)
    folder, _ = write_dense(tmp_path / "m", model)
    out = converted(folder, "gguf:f16")
    assert "output.weight" not in out
    assert "blk.0.ffn_norm.weight" not in out
    assert "blk.0.attn_q.bias" not in out
    assert out["blk.0.attn_norm.bias"].dtype == np.float32
    assert out["blk.0.ffn_up.weight"].dtype == np.float16
    fields = fields_of(gguf_file(tmp_path / "file", model, "f16"))
    assert fields["stablelm.use_parallel_residual"] is True


def test_stablelm_metadata_in_the_converters_order(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("stablelm", kv_heads=2), "q8_0")
    fields = fields_of(reader)
    assert fields["general.architecture"] == "stablelm"
    written = [key for key in fields if key.startswith("stablelm.")]
    expected = {
        "stablelm.context_length": 4096,
        "stablelm.embedding_length": 64,
        "stablelm.block_count": 3,
        "stablelm.feed_forward_length": 160,
        "stablelm.rope.dimension_count": 4,  # a quarter of the 16-wide heads
        "stablelm.attention.head_count": 4,
        "stablelm.attention.head_count_kv": 2,
        "stablelm.use_parallel_residual": False,
        "stablelm.attention.layer_norm_epsilon": pytest.approx(1e-5),
    }
    assert written == list(expected)
    assert {key: fields[key] for key in written} == expected
    keys = list(fields)
    assert keys.index("stablelm.attention.layer_norm_epsilon") < keys.index("general.file_type")
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    assert fields["tokenizer.ggml.model"] == "gpt2"
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q8_0"
    assert types["blk.0.attn_q.bias"] == "F32"


def test_stablelm_config_defaults(tmp_path: Path) -> None:
    """Keys config.json leaves out take transformers' StableLmConfig defaults, as the converter
    reads them; a rope_parameters' partial factor wins over none at the top."""
    extra = {
        "partial_rotary_factor": ABSENT,
        "max_position_embeddings": ABSENT,
        "use_parallel_residual": ABSENT,
        "layer_norm_eps": ABSENT,
        "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    }
    fields = fields_of(gguf_file(tmp_path, dense_model("stablelm", extra=extra), "bf16"))
    assert fields["stablelm.rope.dimension_count"] == 8
    assert fields["stablelm.context_length"] == 4096
    assert fields["stablelm.use_parallel_residual"] is False
    assert fields["stablelm.attention.layer_norm_epsilon"] == pytest.approx(1e-5)


def test_stablelm_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("stablelm", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_norm.bias"] == "F32"
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["output.weight"] == "Q6_K"


def test_stablelm_qk_layernorm_isrefused(tmp_path: Path) -> None:
    """Per-head q/k LayerNorms (StableLM 2 12B) are refused by the config key that asks for
    them, before their tensors are looked at."""
    model = dense_model("stablelm", extra={"qk_layernorm": True})
    weights = random_weights(model)
    for head in range(model.heads):
        weights[f"model.layers.0.self_attn.q_layernorm.norms.{head}.weight"] = weights[
            "model.norm.weight"
        ][:16]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "'qk_layernorm'", "config.json")


def test_stablelm_missing_norm_bias_isrefused(tmp_path: Path) -> None:
    model = dense_model("stablelm")
    weights = random_weights(model)
    del weights["model.layers.1.input_layernorm.bias"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.1.input_layernorm.bias", "missing")


def test_stablelm_bad_rotary_factor_isrefused(tmp_path: Path) -> None:
    model = dense_model("stablelm", extra={"partial_rotary_factor": "quarter"})
    folder, _ = write_dense(tmp_path / "m", model)
    refused(tmp_path, folder, "'partial_rotary_factor'", "'quarter'")
