"""GLM-4 (glm4, dense): tensors as llama.cpp's converter writes them (no rotary permutation, q/k/v
biases, four norms per layer, gate_up_proj whole as ffn_up), the shared metadata with
Glm4Config's defaults and the partial rotary width, GLM's special tokens, a llama-quantize
mixture and the refusals."""

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

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.checks import refused

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


def _layer_names(layer: int) -> list[str]:
    names = ["attn_norm.weight", "attn_output.weight", "ffn_up.weight", "ffn_down.weight"]
    names += [f"attn_{p}.{k}" for p in "qkv" for k in ("weight", "bias")]
    names += ["post_attention_norm.weight", "ffn_norm.weight", "post_ffw_norm.weight"]
    return [f"blk.{layer}.{name}" for name in names]


def test_glm4_tensors_keep_hugging_face_rows(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("glm4"))
    out = converted(folder)
    expected = ["token_embd.weight", "output_norm.weight", "output.weight"]
    for layer in range(3):
        expected += _layer_names(layer)
    assert sorted(out) == sorted(expected)
    for p in ("q", "k"):
        # GLM's rotary half is in NeoX order already: nothing permuted
        for kind in ("weight", "bias"):
            hf = weights[f"model.layers.1.self_attn.{p}_proj.{kind}"].astype(np.float32)
            np.testing.assert_array_equal(out[f"blk.1.attn_{p}.{kind}"], hf)
    fused = weights["model.layers.2.mlp.gate_up_proj.weight"].astype(np.float32)
    assert out["blk.2.ffn_up.weight"].shape == (2 * 160, 64)
    np.testing.assert_array_equal(out["blk.2.ffn_up.weight"], fused)
    # the MLP's input norm is post_attention_layernorm, the block's output norms the others
    pairs = (
        ("post_attention_layernorm", "ffn_norm"),
        ("post_self_attn_layernorm", "post_attention_norm"),
        ("post_mlp_layernorm", "post_ffw_norm"),
    )
    for hf, gguf_name in pairs:
        norm = weights[f"model.layers.0.{hf}.weight"].astype(np.float32)
        np.testing.assert_array_equal(out[f"blk.0.{gguf_name}.weight"], norm)


def test_glm4_without_biases_and_tied(tmp_path: Path) -> None:
    model = dense_model("glm4", tied=True, extra={"attention_bias": False})
    weights = random_weights(model)
    for name in list(weights):
        if name.endswith("_proj.bias"):
            del weights[name]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    out = converted(folder, "gguf:f16")
    assert "output.weight" not in out and "blk.0.attn_q.bias" not in out
    assert out["blk.0.post_ffw_norm.weight"].dtype == np.float32
    assert out["blk.0.ffn_up.weight"].dtype == np.float16


def test_glm4_metadata_and_special_tokens(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("glm4"), "q8_0", pre="glm4")
    fields = fields_of(reader)
    a = "glm4."
    assert fields["general.architecture"] == "glm4"
    expected = {
        "block_count": 3,
        "context_length": 4096,
        "embedding_length": 64,
        "feed_forward_length": 160,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "rope.freq_base": 10000.0,
        "attention.key_length": 16,
        "attention.value_length": 16,
        "rope.dimension_count": 8,  # half of the 16-wide heads
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    keys = list(fields)
    assert keys.index("general.file_type") < keys.index(a + "rope.dimension_count")
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    assert fields["tokenizer.ggml.pre"] == "glm4"
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[fields["tokenizer.ggml.eot_token_id"]] == "<|user|>"
    assert tokens[fields["tokenizer.ggml.bos_token_id"]] == "<|endoftext|>"
    assert tokens[fields["tokenizer.ggml.unknown_token_id"]] == "<|endoftext|>"
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.ffn_up.weight"] == "Q8_0"
    assert types["blk.0.attn_k.bias"] == "F32"


def test_glm4_config_defaults(tmp_path: Path) -> None:
    """Keys config.json leaves out take transformers' Glm4Config defaults, as the converter
    reads them; a rope_parameters' partial factor counts."""
    extra = {
        "rms_norm_eps": ABSENT,
        "max_position_embeddings": ABSENT,
        "partial_rotary_factor": ABSENT,
        "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.25},
    }
    fields = fields_of(gguf_file(tmp_path, dense_model("glm4", extra=extra), "bf16", "glm4"))
    assert fields["glm4.attention.layer_norm_rms_epsilon"] == pytest.approx(1.5625e-07)
    assert fields["glm4.context_length"] == 131072
    assert fields["glm4.rope.dimension_count"] == 4


def test_glm4_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("glm4", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M", pre="glm4")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.post_attention_norm.weight"] == "F32"
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["output.weight"] == "Q6_K"


def test_glm4_missing_post_mlp_norm_isrefused(tmp_path: Path) -> None:
    model = dense_model("glm4")
    weights = random_weights(model)
    del weights["model.layers.2.post_mlp_layernorm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.2.post_mlp_layernorm.weight", "missing")


def test_glm4_split_mlp_isrefused(tmp_path: Path) -> None:
    """A llama-style gate_proj is not part of llama.cpp's glm4 (its gate and up come fused)."""
    model = dense_model("glm4")
    weights = random_weights(model)
    weights["model.layers.0.mlp.gate_proj.weight"] = weights["model.layers.0.mlp.down_proj.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.0.mlp.gate_proj.weight", "glm4")


def test_glm4_multimodal_rope_isrefused(tmp_path: Path) -> None:
    rope = {"rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    folder, _ = write_dense(tmp_path / "m", dense_model("glm4", extra={"rope_parameters": rope}))
    refused(tmp_path, folder, "'mrope_section'", "config.json")


def test_glm4_tokenizer_without_glm_specials_isrefused(tmp_path: Path) -> None:
    from tokenizer_fixtures import write_bpe_tokenizer

    folder = tmp_path / "m"
    model = dense_model("glm4", vocab=write_bpe_tokenizer(folder, 320, "llama3"))
    write_dense(folder, model)
    with pytest.raises(LazyParamsError) as info:
        target = GGUFTarget("f16", pre="llama-bpe")
        lazyparams.convert(target, folder, tmp_path / "o.gguf", progress=False)
    assert "<|user|>" in str(info.value) and "tokenizer.json" in str(info.value)
