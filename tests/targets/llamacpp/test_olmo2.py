"""OLMo 2 (olmo2): tensors as llama.cpp's converter writes them (no rotary permutation, norms
after each block, q/k norms over the whole projection), metadata read back with gguf-py, the
sliding window where a config has one, a llama-quantize mixture and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_dense import (
    config_of,
    converted,
    dense_model,
    fields_of,
    gguf_file,
    random_weights,
    write_dense,
)
from hf_fixtures import write_checkpoint

from tests.targets.llamacpp.checks import refused

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


def _layer_names(layer: int) -> list[str]:
    names = ("attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm")
    names += ("ffn_down", "ffn_gate", "ffn_up", "post_attention_norm", "post_ffw_norm")
    return [f"blk.{layer}.{name}.weight" for name in names]


def test_olmo2_tensors_keep_hugging_face_rows(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("olmo2"))
    out = converted(folder)
    expected = ["token_embd.weight"]
    for layer in range(3):
        expected += _layer_names(layer)
    assert sorted(out) == sorted([*expected, "output_norm.weight", "output.weight"])
    for p in ("q", "k"):
        # llama.cpp's olmo2 applies rotary in Hugging Face's layout: q and k are not permuted
        hf = weights[f"model.layers.1.self_attn.{p}_proj.weight"].astype(np.float32)
        np.testing.assert_array_equal(out[f"blk.1.attn_{p}.weight"], hf)
    assert out["blk.0.attn_q_norm.weight"].shape == (4 * 16,)
    assert out["blk.0.attn_k_norm.weight"].shape == (2 * 16,)


def test_olmo2_f16_types_and_tied_embeddings(tmp_path: Path) -> None:
    folder, _ = write_dense(tmp_path / "m", dense_model("olmo2", tied=True))
    out = converted(folder, "gguf:f16")
    assert "output.weight" not in out
    for name in ("post_attention_norm", "post_ffw_norm", "attn_q_norm", "attn_k_norm"):
        assert out[f"blk.2.{name}.weight"].dtype == np.float32
    assert out["blk.2.ffn_up.weight"].dtype == np.float16
    assert out["token_embd.weight"].dtype == np.float16


def test_olmo2_metadata(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("olmo2"), "q8_0")
    fields = fields_of(reader)
    a = "olmo2."
    assert fields["general.architecture"] == "olmo2"
    expected = {
        "block_count": 3,
        "context_length": 4096,
        "embedding_length": 64,
        "feed_forward_length": 160,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "rope.freq_base": 500000.0,
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    # the converter writes neither llama's vocab_size and rotary width nor a window here
    for key in ("vocab_size", "rope.dimension_count", "attention.sliding_window"):
        assert a + key not in fields
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert fields["tokenizer.ggml.pre"] == "llama-bpe"
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q8_0"
    assert types["blk.0.attn_q_norm.weight"] == "F32"


@pytest.mark.parametrize(
    ("layer_types", "pattern"),
    [
        (["sliding_attention", "full_attention", "sliding_attention"], [True, False, True]),
        (None, [True, True, True, False]),  # the converter's default: each fourth is full
    ],
)
def test_olmo2_sliding_window(
    tmp_path: Path, layer_types: list[str] | None, pattern: list[bool]
) -> None:
    extra = {"sliding_window": 32, **({"layer_types": layer_types} if layer_types else {})}
    model = dense_model("olmo2", layers=len(pattern), extra=extra)
    fields = fields_of(gguf_file(tmp_path, model, "bf16"))
    assert fields["olmo2.attention.sliding_window"] == 32
    assert fields["olmo2.attention.sliding_window_pattern"] == pattern
    keys = list(fields)
    assert keys.index("general.file_type") < keys.index("olmo2.attention.sliding_window")


def test_olmo2_q4_k_m_mixture(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("olmo2", hidden=256, intermediate=512), "Q4_K_M")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.post_ffw_norm.weight"] == "F32"
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["output.weight"] == "Q6_K"


def test_olmo2_missing_post_norm_isrefused(tmp_path: Path) -> None:
    model = dense_model("olmo2")
    weights = random_weights(model)
    del weights["model.layers.1.post_feedforward_layernorm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.1.post_feedforward_layernorm.weight", "missing")


def test_olmo2_pre_norm_tensor_isrefused(tmp_path: Path) -> None:
    """A llama-style input norm is not part of llama.cpp's olmo2: refused by name."""
    model = dense_model("olmo2")
    weights = random_weights(model)
    weights["model.layers.0.input_layernorm.weight"] = weights["model.norm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.0.input_layernorm.weight", "olmo2")


def test_olmo2_bad_sliding_window_isrefused(tmp_path: Path) -> None:
    model = dense_model("olmo2", extra={"sliding_window": "wide"})
    folder, _ = write_dense(tmp_path / "m", model)
    refused(tmp_path, folder, "'sliding_window'", "'wide'")
