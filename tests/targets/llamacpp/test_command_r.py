"""Command R (command-r): tensors as llama.cpp's converter writes them (no rotary permutation,
the output tied to the embeddings, Command R+'s per-head q/k norms in F32), the context length
from model_max_length, the logit scale and rope scaling "none", a llama-quantize mixture and
the refusals; files read back with gguf-py."""

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


def test_command_r_tensors(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("cohere"))
    out = converted(folder, "gguf:f16")
    per_layer = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output")
    per_layer += ("ffn_gate", "ffn_up", "ffn_down")
    expected = {f"blk.{i}.{n}.weight" for i in range(3) for n in per_layer}
    assert set(out) == expected | {"token_embd.weight", "output_norm.weight"}
    for p in ("q", "k"):
        hf = weights[f"model.layers.2.self_attn.{p}_proj.weight"].astype(np.float16)
        np.testing.assert_array_equal(out[f"blk.2.attn_{p}.weight"], hf)
    assert out["blk.0.attn_norm.weight"].dtype == np.float32


def test_command_r_plus_head_norms(tmp_path: Path) -> None:
    """use_qk_norm: a LayerNorm weight per head of q and k, 2-D but kept F32 as a norm."""
    folder, weights = write_dense(
        tmp_path / "m", dense_model("cohere", extra={"use_qk_norm": True})
    )
    out = converted(folder, "gguf:q8_0")
    q_norm, k_norm = out["blk.1.attn_q_norm.weight"], out["blk.1.attn_k_norm.weight"]
    assert q_norm.dtype == np.float32 and q_norm.shape == (4, 16)
    assert k_norm.shape == (2, 16)
    hf = weights["model.layers.1.self_attn.k_norm.weight"].astype(np.float32)
    np.testing.assert_array_equal(k_norm, hf)


def test_command_r_metadata(tmp_path: Path) -> None:
    model = dense_model("cohere", extra={"model_max_length": 16384, "rope_theta": 8e6})
    reader = gguf_file(tmp_path, model, "bf16")
    fields = fields_of(reader)
    a = "command-r."
    assert fields["general.architecture"] == "command-r"
    expected = {
        "block_count": 3,
        "context_length": 16384,  # model_max_length, not max_position_embeddings
        "embedding_length": 64,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "rope.freq_base": 8e6,
        "logit_scale": 0.0625,
        "rope.scaling.type": "none",
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "attention.layer_norm_epsilon"] == pytest.approx(1e-5)
    keys = list(fields)
    assert keys.index("general.file_type") < keys.index(a + "logit_scale")
    assert a + "attention.layer_norm_rms_epsilon" not in fields
    assert a + "attention.key_length" not in fields  # CohereConfig adds no head_dim
    assert fields["tokenizer.ggml.model"] == "gpt2"


def test_command_r_scaling_written_before_is_overwritten_in_place(tmp_path: Path) -> None:
    """A linear rope scaling's type is replaced by "none", at its own place, factor kept."""
    scaling = {"rope_type": "linear", "factor": 2.0}
    fields = fields_of(
        gguf_file(tmp_path, dense_model("cohere", extra={"rope_scaling": scaling}), "f16")
    )
    keys = list(fields)
    assert fields["command-r.rope.scaling.type"] == "none"
    assert fields["command-r.rope.scaling.factor"] == 2.0
    assert keys.index("command-r.rope.scaling.type") < keys.index("general.file_type")


def test_command_r_q4_k_m_mixture(tmp_path: Path) -> None:
    model = dense_model("cohere", hidden=256, intermediate=512)
    reader = gguf_file(tmp_path, model, "Q4_K_M")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == "Q4_K"
    assert types["blk.0.attn_norm.weight"] == "F32"


def test_command_r_untied_head_isrefused(tmp_path: Path) -> None:
    """llama.cpp's command-r has no output tensor: an lm_head cannot be written."""
    model = dense_model("cohere", tied=False)
    folder, _ = write_dense(tmp_path / "m", model)
    refused(tmp_path, folder, "'lm_head.weight'", "command-r")


def test_command_r_missing_logit_scale_isrefused(tmp_path: Path) -> None:
    model = dense_model("cohere")
    config = config_of(model)
    del config["logit_scale"]
    folder = write_checkpoint(tmp_path / "m", random_weights(model), config)
    refused(tmp_path, folder, "'logit_scale'", "config.json")
