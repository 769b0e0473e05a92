"""phi-2 (phi2): q/k/v with biases and no rotary permutation, the converter class's own metadata
(feed-forward 4 x hidden, key-value heads = heads, partial rotary width, add_bos_token false in
its place), its GPT-2 style vocabulary and the refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_phi import (
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


def test_phi2_tensors_and_biases(tmp_path: Path) -> None:
    folder, weights = write_model(tmp_path / "m", model_of("phi2"))
    out = converted(folder, "gguf:f16")
    layer = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down"]
    expected = {f"blk.{b}.{n}.{p}" for b in range(2) for n in layer for p in ("weight", "bias")}
    expected |= {"token_embd.weight", "output_norm.weight", "output_norm.bias"}
    expected |= {"output.weight", "output.bias"}
    assert set(out) == expected
    q = weights["model.layers.1.self_attn.q_proj.weight"]
    np.testing.assert_array_equal(out["blk.1.attn_q.weight"], np.asarray(q, dtype=np.float16))
    assert out["blk.1.attn_q.bias"].dtype == np.float32
    assert out["output.bias"].shape == (320,)


def test_phi2_metadata(tmp_path: Path) -> None:
    folder = tmp_path / "phi2"
    extra = {"partial_rotary_factor": 0.4, "num_key_value_heads": None}
    write_model(folder, model_of("phi2", vocab=write_gpt2_tokenizer(folder), extra=extra))
    fields = fields_of(gguf_file(folder, "q8_0", pre="llama-bpe"))
    a = "phi2."
    expected = {
        "context_length": 4096,
        "embedding_length": 64,
        "feed_forward_length": 256,  # 4 x hidden_size, whatever intermediate_size says
        "block_count": 2,
        "attention.head_count": 4,
        "attention.head_count_kv": 4,
        "rope.dimension_count": 6,  # int(0.4 * 64) // 4
    }
    assert {key: fields[a + key] for key in expected} == expected
    keys = list(fields)
    ours = [k for k in keys if k.startswith(a)]
    assert ours == [a + k for k in [*list(expected)[:6], "attention.layer_norm_epsilon"]] + [
        a + "rope.dimension_count"
    ]
    # written with the hyperparameters, after the file type; the tokenizer's files may set it
    position = keys.index("tokenizer.ggml.add_bos_token")
    assert keys[position - 1] == "general.file_type"
    assert keys[position + 1] == "general.quantization_version"
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    assert fields["tokenizer.ggml.model"] == "gpt2"


def test_phi2_missing_head_bias_isrefused(tmp_path: Path) -> None:
    model = model_of("phi2")
    weights = random_weights(model)
    del weights["lm_head.bias"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "lm_head.bias", "missing")


def test_phi2_qk_layernorm_is_refused_by_name(tmp_path: Path) -> None:
    model = model_of("phi2", extra={"qk_layernorm": True})
    weights = random_weights(model)
    weights["model.layers.0.self_attn.q_layernorm.weight"] = weights["model.final_layernorm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.0.self_attn.q_layernorm.weight", "phi2")
