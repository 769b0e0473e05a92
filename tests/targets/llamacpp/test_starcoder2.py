"""StarCoder2 (starcoder2): LayerNorm weights and biases, the ungated c_fc/c_proj MLP with its
biases (absent without use_bias), no rotary permutation, the shared metadata only (no sliding
window key), a llama-quantize mixture and the refusals; files read back with gguf-py."""

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

import lazyparams
from lazyparams.errors import LazyParamsError

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


def test_starcoder2_tensors_and_biases(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("starcoder2"))
    out = converted(folder, "gguf:f16")
    up, up_bias = out["blk.1.ffn_up.weight"], out["blk.1.ffn_up.bias"]
    np.testing.assert_array_equal(up, weights["model.layers.1.mlp.c_fc.weight"].astype(np.float16))
    assert up_bias.dtype == np.float32 and up_bias.shape == (160,)
    down = weights["model.layers.1.mlp.c_proj.weight"].astype(np.float16)
    np.testing.assert_array_equal(out["blk.1.ffn_down.weight"], down)
    k = weights["model.layers.1.self_attn.k_proj.weight"].astype(np.float16)
    np.testing.assert_array_equal(out["blk.1.attn_k.weight"], k)  # no rotary permutation
    for name in ("attn_norm.bias", "ffn_norm.bias", "attn_output.bias", "attn_q.bias"):
        assert out[f"blk.2.{name}"].dtype == np.float32
    assert out["output_norm.bias"].dtype == np.float32
    assert "output.weight" not in out and "blk.0.ffn_gate.weight" not in out
    assert len(out) == 3 + 3 * 16


def test_starcoder2_without_use_bias(tmp_path: Path) -> None:
    model = dense_model("starcoder2", tied=False, extra={"use_bias": False})
    folder, _ = write_dense(tmp_path / "m", model)
    out = converted(folder, "gguf:q8_0")
    assert "blk.0.attn_q.bias" not in out and "blk.0.ffn_up.bias" not in out
    assert "blk.0.attn_norm.bias" in out  # the LayerNorms keep theirs
    assert out["output.weight"].dtype == np.uint8  # q8_0 blocks


def test_starcoder2_metadata(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("starcoder2"), "bf16", pre="starcoder")
    fields = fields_of(reader)
    a = "starcoder2."
    assert fields["general.architecture"] == "starcoder2"
    expected = {
        "block_count": 3,
        "context_length": 4096,
        "embedding_length": 64,
        "feed_forward_length": 160,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "rope.freq_base"] == pytest.approx(999999.4)
    assert fields[a + "attention.layer_norm_epsilon"] == pytest.approx(1e-5)
    keys = [key for key in fields if key.startswith(a)]
    assert keys[-1] == a + "attention.layer_norm_epsilon"  # nothing after the shared keys
    assert a + "attention.sliding_window" not in fields
    assert fields["tokenizer.ggml.pre"] == "starcoder"


def test_starcoder2_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("starcoder2", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M", pre="starcoder")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.ffn_up.weight"] == "Q4_K"
    assert types["blk.0.ffn_up.bias"] == "F32"


def test_starcoder2_missing_norm_bias_is_refused(tmp_path: Path) -> None:
    model = dense_model("starcoder2")
    weights = random_weights(model)
    del weights["model.layers.2.post_attention_layernorm.bias"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    dst = tmp_path / "out.gguf"
    with pytest.raises(LazyParamsError) as info:
        lazyparams.convert("gguf:f16", folder, dst, progress=False)
    assert "model.layers.2.post_attention_layernorm.bias" in str(info.value)
    assert not dst.exists()
