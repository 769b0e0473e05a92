"""EXAONE 3 (exaone): tensors as llama.cpp's converter writes them from the `transformer.h.*`
names (no rotary permutation), llama 3's rope factors first, the shared metadata then the
rotary width, a llama-quantize mixture and the refusals."""

from __future__ import annotations

import math
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

_LLAMA3 = {
    "factor": 8.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 256,
    "rope_type": "llama3",
}

_NAMES = (
    ("ln_1", "attn_norm"),
    ("attn.attention.q_proj", "attn_q"),
    ("attn.attention.k_proj", "attn_k"),
    ("attn.attention.v_proj", "attn_v"),
    ("attn.attention.out_proj", "attn_output"),
    ("ln_2", "ffn_norm"),
    ("mlp.c_fc_0", "ffn_gate"),
    ("mlp.c_fc_1", "ffn_up"),
    ("mlp.c_proj", "ffn_down"),
)


def test_exaone_tensors_from_gpt2_style_names(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("exaone"))
    out = converted(folder)
    expected = ["token_embd.weight", "output_norm.weight", "output.weight"]
    expected += [f"blk.{b}.{g}.weight" for b in range(3) for _, g in _NAMES]
    assert sorted(out) == sorted(expected)
    for hf, gguf_name in _NAMES:
        # q and k included: llama.cpp's exaone uses NeoX rotary on Hugging Face's layout
        source = weights[f"transformer.h.1.{hf}.weight"].astype(np.float32)
        np.testing.assert_array_equal(out[f"blk.1.{gguf_name}.weight"], source)
    np.testing.assert_array_equal(
        out["token_embd.weight"], weights["transformer.wte.weight"].astype(np.float32)
    )


def _llama3_factors(dim: int, base: float) -> list[float]:
    """llama 3's frequency factors, from the published formula (original context 256)."""
    out = []
    for i in range(0, dim, 2):
        wavelen = 2 * math.pi * base ** (i / dim)
        if wavelen < 256 / 4.0:
            out.append(1.0)
        elif wavelen > 256 / 1.0:
            out.append(8.0)
        else:
            smooth = (256 / wavelen - 1.0) / (4.0 - 1.0)
            out.append(1 / ((1 - smooth) / 8.0 + smooth))
    return out


def test_exaone_llama3_rope_factors_come_first(tmp_path: Path) -> None:
    model = dense_model("exaone", tied=True, extra={"rope_scaling": _LLAMA3})
    folder, _ = write_dense(tmp_path / "m", model)
    out = converted(folder, "gguf:f16")
    assert next(iter(out)) == "rope_freqs.weight"
    assert "output.weight" not in out
    factors = out["rope_freqs.weight"]
    assert factors.dtype == np.float32 and factors.shape == (8,)
    np.testing.assert_allclose(factors, _llama3_factors(16, 1000000.0), rtol=1e-5)
    assert out["blk.0.ffn_up.weight"].dtype == np.float16


def test_exaone_metadata(tmp_path: Path) -> None:
    extra = {"rope_scaling": _LLAMA3, "num_hidden_layers": ABSENT}
    reader = gguf_file(tmp_path, dense_model("exaone", extra=extra), "q8_0")
    fields = fields_of(reader)
    a = "exaone."
    assert fields["general.architecture"] == "exaone"
    expected = {
        "block_count": 3,  # from EXAONE's own num_layers
        "context_length": 4096,
        "embedding_length": 64,
        "feed_forward_length": 160,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "rope.freq_base": 1000000.0,
        "attention.key_length": 16,
        "attention.value_length": 16,
        "rope.dimension_count": 16,
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "attention.layer_norm_epsilon"] == pytest.approx(1e-5)
    # llama 3's rope is its factors tensor: no rope scaling keys, as the converter writes it
    assert not [key for key in fields if key.startswith(a + "rope.scaling")]
    keys = list(fields)
    assert keys.index("general.file_type") < keys.index(a + "rope.dimension_count")
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q8_0
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["rope_freqs.weight"] == "F32"
    assert types["blk.0.attn_q.weight"] == "Q8_0"


def test_exaone_partial_rotary_width(tmp_path: Path) -> None:
    model = dense_model("exaone", extra={"partial_rotary_factor": 0.5, "head_dim": ABSENT})
    fields = fields_of(gguf_file(tmp_path, model, "bf16"))
    assert fields["exaone.rope.dimension_count"] == 8
    assert "exaone.attention.key_length" not in fields


def test_exaone_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("exaone", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_norm.weight"] == "F32"
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["output.weight"] == "Q6_K"


def test_exaone_other_activation_isrefused(tmp_path: Path) -> None:
    model = dense_model("exaone", extra={"activation_function": "gelu"})
    folder, _ = write_dense(tmp_path / "m", model)
    refused(tmp_path, folder, "'activation_function'", "'gelu'")


def test_exaone_missing_gate_isrefused(tmp_path: Path) -> None:
    model = dense_model("exaone")
    weights = random_weights(model)
    del weights["transformer.h.2.mlp.c_fc_0.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "transformer.h.2.mlp.c_fc_0.weight", "missing")


def test_exaone_llama_names_arerefused(tmp_path: Path) -> None:
    """Llama's names are not EXAONE's checkpoint names: refused by the tensor's name."""
    model = dense_model("exaone")
    weights = random_weights(model)
    weights["model.layers.0.mlp.gate_proj.weight"] = weights["transformer.h.0.mlp.c_fc_0.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.0.mlp.gate_proj.weight", "exaone")
