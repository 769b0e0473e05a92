"""SmolLM3 (smollm3): llama's tensors and rotary permutation under llama.cpp's own architecture,
llama's metadata keys and vocabulary, llama 3 rope factors, a llama-quantize mixture and the
refusals; files read back with gguf-py."""

from __future__ import annotations

import math
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

_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 1024,
}


def _interleaved(rows: np.ndarray, heads: int) -> np.ndarray:
    """Each head's two rotary halves interleaved, as llama.cpp wants q and k."""
    per_head = rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:])
    return per_head.swapaxes(1, 2).reshape(rows.shape)


def test_smollm3_permutes_q_and_k_as_llama(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("smollm3"))
    out = converted(folder)
    layer = "model.layers.3.self_attn"
    q = weights[f"{layer}.q_proj.weight"].astype(np.float32)
    k = weights[f"{layer}.k_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.3.attn_q.weight"], _interleaved(q, 4))
    np.testing.assert_array_equal(out["blk.3.attn_k.weight"], _interleaved(k, 2))
    v = weights[f"{layer}.v_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.3.attn_v.weight"], v)
    assert "output.weight" not in out  # tied embeddings
    assert "rope_freqs.weight" not in out  # no llama3 rope in the config
    assert {f"blk.3.{n}.weight" for n in ("attn_norm", "ffn_norm", "ffn_gate")} <= set(out)


def test_smollm3_llama3_rope_factors(tmp_path: Path) -> None:
    """A llama3 rope config writes the factors first, in F32, whatever the type."""
    model = dense_model("smollm3", extra={"rope_scaling": _LLAMA3_ROPE})
    folder, _ = write_dense(tmp_path / "m", model)
    out = converted(folder, "gguf:q8_0")
    assert next(iter(out)) == "rope_freqs.weight"
    factors = out["rope_freqs.weight"]
    assert factors.dtype == np.float32 and factors.shape == (16 // 2,)
    expected = []
    for i in range(0, 16, 2):
        wavelen = 2 * math.pi * 5000000.0 ** (i / 16)
        if wavelen < 1024 / 4.0:
            expected.append(1.0)
        elif wavelen > 1024 / 1.0:
            expected.append(8.0)
        else:
            smooth = (1024 / wavelen - 1.0) / (4.0 - 1.0)
            expected.append(1 / ((1 - smooth) / 8.0 + smooth))
    np.testing.assert_allclose(factors, expected, rtol=1e-5)


def test_smollm3_metadata(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("smollm3"), "f16")
    fields = fields_of(reader)
    a = "smollm3."
    assert fields["general.architecture"] == "smollm3"
    expected = {
        "block_count": 4,
        "embedding_length": 64,
        "feed_forward_length": 160,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "rope.freq_base": 5000000.0,
        "vocab_size": 320,
        "rope.dimension_count": 16,
    }
    assert {key: fields[a + key] for key in expected} == expected
    keys = list(fields)
    # llama's extra keys come after the file type, as the converter's llama class adds them
    assert keys.index("general.file_type") < keys.index(a + "vocab_size")
    # SmolLM3's config class adds no head_dim: no key/value lengths, no no-rope interval key
    assert not any(key.startswith(a + "attention.key_length") for key in keys)
    assert fields["tokenizer.ggml.model"] == "gpt2"
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "F16" and types["blk.0.attn_norm.weight"] == "F32"


def test_smollm3_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("smollm3", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["token_embd.weight"] == "Q6_K"  # tied: the embeddings are the output


def test_smollm3_foreign_tensor_is_refused(tmp_path: Path) -> None:
    """A Qwen3-style per-head norm is not part of llama.cpp's smollm3: refused by name."""
    model = dense_model("smollm3")
    weights = random_weights(model)
    weights["model.layers.0.self_attn.q_norm.weight"] = weights["model.norm.weight"][:16]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    dst = tmp_path / "out.gguf"
    with pytest.raises(LazyParamsError) as info:
        lazyparams.convert("gguf:f16", folder, dst, progress=False)
    assert "model.layers.0.self_attn.q_norm.weight" in str(info.value)
    assert "smollm3" in str(info.value)
    assert not dst.exists()
