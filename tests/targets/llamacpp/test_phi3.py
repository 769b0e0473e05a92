"""Phi-3 / Phi-3.5 / Phi-4 (phi3): the fused qkv and gate_up tensors as the converter writes them,
the long-context rope factors and attention factor, the converter class's own metadata order,
Phi-3's sentencepiece rules and Phi-4's BPE, a llama-quantize mixture and the refusals."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_phi import (
    ABSENT,
    LONG_FACTORS,
    LONGROPE,
    PHI3_ADDED,
    SHORT_FACTORS,
    config_of,
    converted,
    fields_of,
    gguf_file,
    model_of,
    random_weights,
    write_gpt2_tokenizer,
    write_model,
    write_phi3_tokenizer,
)
from hf_fixtures import write_checkpoint

from tests.targets.llamacpp.checks import refused

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
pytest.importorskip("sentencepiece", reason="the llamacpp extra (sentencepiece) is not installed")

PHI3_KEYS = [
    "context_length",
    "rope.scaling.original_context_length",
    "embedding_length",
    "feed_forward_length",
    "block_count",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "rope.dimension_count",
    "rope.freq_base",
]


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def test_phi3_fused_tensors_are_written_as_they_are(tmp_path: Path) -> None:
    folder, weights = write_model(tmp_path / "m", model_of("phi3"))
    out = converted(folder)
    layer = ["attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"]
    expected = {f"blk.{b}.{n}.weight" for b in range(2) for n in layer}
    expected |= {"token_embd.weight", "output_norm.weight", "output.weight"}
    assert set(out) == expected
    # llama.cpp's phi3 splits q/k/v and gate/up itself: the rows stay in Hugging Face's order
    qkv = weights["model.layers.1.self_attn.qkv_proj.weight"]
    np.testing.assert_array_equal(out["blk.1.attn_qkv.weight"], _f32(qkv))
    gate_up = weights["model.layers.0.mlp.gate_up_proj.weight"]
    np.testing.assert_array_equal(out["blk.0.ffn_up.weight"], _f32(gate_up))
    assert out["blk.0.attn_qkv.weight"].shape == ((4 + 2 * 2) * 16, 64)


def test_phi3_metadata_in_the_converter_class_order(tmp_path: Path) -> None:
    folder = tmp_path / "phi3"
    model = model_of("phi3", vocab=write_phi3_tokenizer(folder))
    write_model(folder, model)
    reader = gguf_file(folder, "f16")
    fields = fields_of(reader)
    keys = [k for k in fields if k.startswith("phi3.") or k == "general.file_type"]
    assert keys == [
        *(f"phi3.{k}" for k in PHI3_KEYS),
        "general.file_type",
        "phi3.attention.sliding_window",
    ]
    assert fields["phi3.rope.dimension_count"] == 16
    assert fields["phi3.attention.sliding_window"] == 2047
    assert fields["phi3.rope.scaling.original_context_length"] == 4096
    assert fields["phi3.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    assert "phi3.rope.scaling.attn_factor" not in fields
    assert not any(t.name.startswith("rope_factors") for t in reader.tensors)
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_F16
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_qkv.weight"] == "F16"
    assert types["blk.0.ffn_norm.weight"] == "F32"


def test_phi3_sentencepiece_added_tokens(tmp_path: Path) -> None:
    """Phi-3's rules: added tokens user-defined unless marked special, text kept as written;
    the rest of the embedding padded with unused `[PAD{i}]` tokens."""
    folder = tmp_path / "phi3"
    vocab = write_phi3_tokenizer(folder)
    write_model(folder, model_of("phi3", vocab=vocab))
    fields = fields_of(gguf_file(folder, "q8_0"))
    assert fields["tokenizer.ggml.model"] == "llama"
    assert fields["tokenizer.ggml.pre"] == "default"
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    scores = fields["tokenizer.ggml.scores"]
    assert len(tokens) == vocab
    first = vocab - len(PHI3_ADDED) - 4
    for offset, (content, special) in enumerate(PHI3_ADDED):
        assert tokens[first + offset] == content
        kind = gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED
        assert types[first + offset] == kind
        assert scores[first + offset] == -1000.0
    assert tokens[-1] == f"[PAD{vocab - 1}]"
    assert types[-1] == gguf.TokenType.UNUSED
    assert fields["tokenizer.ggml.bos_token_id"] == 1


def test_phi3_added_tokens_of_tokenizer_json(tmp_path: Path) -> None:
    """tokenizer.json's added_tokens are applied last, by the same rule."""
    folder = tmp_path / "phi3"
    vocab = write_phi3_tokenizer(folder)
    added = [{"id": vocab - 1, "content": "<|placeholder|>", "special": True}]
    (folder / "tokenizer.json").write_text(
        '{"added_tokens": ' + str(added).replace("'", '"').replace("True", "true") + "}"
    )
    write_model(folder, model_of("phi3", vocab=vocab))
    fields = fields_of(gguf_file(folder, "f32"))
    assert fields["tokenizer.ggml.tokens"][-1] == "<|placeholder|>"
    assert fields["tokenizer.ggml.token_type"][-1] == gguf.TokenType.CONTROL


def test_phi35_long_context_rope_factors(tmp_path: Path) -> None:
    folder = tmp_path / "phi35"
    model = model_of("phi3", kv_heads=4, vocab=write_phi3_tokenizer(folder), extra=LONGROPE)
    write_model(folder, model)
    reader = gguf_file(folder, "bf16")
    names = [t.name for t in reader.tensors]
    assert names[:2] == ["rope_factors_long.weight", "rope_factors_short.weight"]
    tensors = {t.name: t for t in reader.tensors}
    for name, factors in (("long", LONG_FACTORS), ("short", SHORT_FACTORS)):
        tensor = tensors[f"rope_factors_{name}.weight"]
        assert tensor.tensor_type.name == "F32"
        np.testing.assert_array_equal(tensor.data, np.asarray(factors, dtype=np.float32))
    fields = fields_of(reader)
    keys = list(fields)
    # written while the converter makes the factor tensors: before general.type
    assert keys[:3] == ["general.architecture", "phi3.rope.scaling.attn_factor", "general.type"]
    scale = 131072 / 4096
    expected = math.sqrt(1 + math.log(scale) / math.log(4096))
    assert fields["phi3.rope.scaling.attn_factor"] == pytest.approx(expected)
    assert fields["phi3.context_length"] == 131072
    assert "phi3.rope.scaling.type" not in fields


def test_phi4_mini_partial_rotary_bpe_and_tied_embeddings(tmp_path: Path) -> None:
    folder = tmp_path / "phi4mini"
    extra = {
        **LONGROPE,
        "partial_rotary_factor": 0.75,
        "rope_scaling": {"long_factor": [1.5] * 6, "short_factor": [1.0] * 6, "type": "longrope"},
        "sliding_window": None,
    }
    model = model_of("phi3", tied=True, vocab=write_gpt2_tokenizer(folder), extra=extra)
    write_model(folder, model)
    reader = gguf_file(folder, "q8_0", pre="llama-bpe")
    fields = fields_of(reader)
    assert fields["phi3.rope.dimension_count"] == 12  # int(0.75 * 64) // 4
    assert fields["phi3.attention.sliding_window"] == 0  # Phi-4 has none
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert fields["tokenizer.ggml.pre"] == "llama-bpe"
    names = {t.name for t in reader.tensors}
    assert "output.weight" not in names
    assert len(reader.tensors[0].data) == 6


def test_phi3_q4_k_m_mixture(tmp_path: Path) -> None:
    folder = tmp_path / "phi3"
    model = model_of("phi3", hidden=256, intermediate=256, vocab=write_phi3_tokenizer(folder))
    write_model(folder, model)
    reader = gguf_file(folder, "q4_k_m")
    assert fields_of(reader)["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_qkv.weight"] == "Q4_K"
    assert types["blk.0.attn_norm.weight"] == "F32"
    assert types["output.weight"] == "Q6_K"


def test_qkv_rows_that_contradict_the_config(tmp_path: Path) -> None:
    model = model_of("phi3")
    config = {**config_of(model), "num_key_value_heads": 4}
    folder = write_checkpoint(tmp_path / "m", random_weights(model), config)
    refused(tmp_path, folder, "qkv_proj.weight", "num_key_value_heads=4", "128")


def test_gate_up_rows_that_contradict_the_config(tmp_path: Path) -> None:
    model = model_of("phi3")
    config = {**config_of(model), "intermediate_size": 128}
    folder = write_checkpoint(tmp_path / "m", random_weights(model), config)
    refused(tmp_path, folder, "gate_up_proj.weight", "intermediate_size=128")


def test_long_factors_of_the_wrong_length(tmp_path: Path) -> None:
    scaling = {"long_factor": [1.0] * 7, "short_factor": [1.0] * 8, "type": "su"}
    model = model_of("phi3", extra={**LONGROPE, "rope_scaling": scaling})
    folder, _ = write_model(tmp_path / "m", model)
    refused(tmp_path, folder, "long_factor", "rope.dimension_count / 2 = 8")


def test_separate_q_k_v_are_refused_by_name(tmp_path: Path) -> None:
    model = model_of("phi3", extra={"sliding_window": ABSENT})
    weights = random_weights(model)
    weights["model.layers.0.self_attn.q_proj.weight"] = weights["model.embed_tokens.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(model))
    refused(tmp_path, folder, "model.layers.0.self_attn.q_proj.weight", "phi3")
