"""Command R7B (cohere2): Command R's tensors without head norms, the sliding window, the
rotary width from rotary_pct, the key/value widths transformers' config adds, a llama-quantize
mixture and the refusals (attention biases, missing rotary_pct); files read back with gguf-py."""

from __future__ import annotations

import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_dense import (
    ABSENT,
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


def test_cohere2_tensors(tmp_path: Path) -> None:
    folder, weights = write_dense(tmp_path / "m", dense_model("cohere2"))
    out = converted(folder)
    assert "output.weight" not in out and len(out) == 2 + 4 * 8
    hf = weights["model.layers.3.self_attn.q_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.3.attn_q.weight"], hf)  # no rotary permutation


@pytest.mark.parametrize(("rotary_pct", "head_dim", "width"), [(1.0, None, 16), (0.5, 32, 8)])
def test_cohere2_metadata(
    tmp_path: Path, rotary_pct: float, head_dim: int | None, width: int
) -> None:
    """The rotary width is rotary_pct of hidden_size / heads whatever head_dim says; the
    key/value lengths are head_dim, or hidden_size / heads as Cohere2Config gives it."""
    extra = {"rotary_pct": rotary_pct, "head_dim": head_dim if head_dim else ABSENT}
    reader = gguf_file(tmp_path, dense_model("cohere2", extra=extra), "q8_0")
    fields = fields_of(reader)
    a = "cohere2."
    assert fields["general.architecture"] == "cohere2"
    expected = {
        "block_count": 4,
        "attention.head_count": 4,
        "attention.head_count_kv": 2,
        "attention.key_length": head_dim or 16,
        "attention.value_length": head_dim or 16,
        "rope.freq_base": 50000.0,
        "logit_scale": 0.25,
        "attention.sliding_window": 512,
        "vocab_size": 320,
        "rope.dimension_count": width,
        "rope.scaling.type": "none",
    }
    assert {key: fields[a + key] for key in expected} == expected
    keys = [key for key in fields if key.startswith(a)]
    after = ["logit_scale", "attention.sliding_window", "vocab_size", "rope.dimension_count"]
    assert keys[-5:] == [a + key for key in [*after, "rope.scaling.type"]]
    assert a + "attention.sliding_window_pattern" not in fields  # llama.cpp fixes it


def test_cohere2_q4_k_m_mixture(tmp_path: Path) -> None:
    reader = gguf_file(tmp_path, dense_model("cohere2", hidden=256, intermediate=512), "Q4_K_M")
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    assert types["blk.0.ffn_gate.weight"] == "Q4_K"
    assert types["token_embd.weight"] == "Q6_K"  # tied: the embeddings are the output


def test_cohere2_attention_bias_isrefused(tmp_path: Path) -> None:
    model = dense_model("cohere2")
    weights = random_weights(model)
    weights["model.layers.0.self_attn.q_proj.bias"] = weights["model.norm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "'model.layers.0.self_attn.q_proj.bias'", "cohere2")


def test_cohere2_missing_rotary_pct_isrefused(tmp_path: Path) -> None:
    folder, _ = write_dense(tmp_path / "m", dense_model("cohere2", extra={"rotary_pct": ABSENT}))
    refused(tmp_path, folder, "'rotary_pct'", "config.json")
