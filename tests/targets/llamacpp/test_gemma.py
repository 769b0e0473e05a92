"""Gemma, Gemma 2 and Gemma 3 (text): norms written plus one, no rotary permutation, lm_head
left out (Gemma, Gemma 2) or kept (Gemma 3), each family's metadata in the converter's order,
read back with gguf-py, the Gemma 3 embedding cut to a tokenizer.json, and every refusal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_gemma import (
    GEMMA_KINDS,
    HEAD_DIM,
    gemma_tensor_shapes,
    write_gemma,
    write_gemma_with_tokenizer,
)

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.hparams import sliding_rope_theta
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")

NORMS = {
    "gemma": ("attn_norm", "ffn_norm"),
    "gemma2": ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"),
    "gemma3": (
        "attn_norm",
        "post_attention_norm",
        "ffn_norm",
        "post_ffw_norm",
        "attn_q_norm",
        "attn_k_norm",
    ),
}
HF_NORMS = {
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
}


def _convert(folder: Path, spec: Any = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def _hf_norm(kind: str, gguf_norm: str) -> str:
    # Gemma 1 has no pre-feed-forward norm: its post-attention norm is llama.cpp's ffn_norm
    if kind == "gemma" and gguf_norm == "ffn_norm":
        return "post_attention_layernorm"
    return HF_NORMS[gguf_norm]


@pytest.mark.parametrize("kind", GEMMA_KINDS)
def test_norms_are_one_plus_weight_and_projections_unpermuted(tmp_path: Path, kind: str) -> None:
    folder, weights = write_gemma(tmp_path / kind, kind)
    out = _convert(folder)
    for layer in range(3):
        for norm in NORMS[kind]:
            source = weights[f"model.layers.{layer}.{_hf_norm(kind, norm)}.weight"]
            got = out[f"blk.{layer}.{norm}.weight"]
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, source.astype(np.float32) + 1.0)
        for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")):
            source = weights[f"model.layers.{layer}.self_attn.{p}_proj.weight"]
            np.testing.assert_array_equal(out[f"blk.{layer}.attn_{g}.weight"], source)
    expected_norm = weights["model.norm.weight"].astype(np.float32) + 1.0
    np.testing.assert_array_equal(out["output_norm.weight"], expected_norm)
    np.testing.assert_array_equal(out["token_embd.weight"], weights["model.embed_tokens.weight"])
    per_layer = len(gemma_tensor_shapes(kind, 400)) - 2  # embeddings, final norm
    assert len(out) == 2 + per_layer


def test_float16_checkpoint_adds_one_in_float16(tmp_path: Path) -> None:
    """The converter adds one in the checkpoint's float16 and widens the sum afterwards."""
    folder, weights = write_gemma(tmp_path / "gemma", "gemma", dtype=np.float16)
    out = _convert(folder)
    source = weights["model.layers.0.input_layernorm.weight"]
    in_f16 = (source + np.float16(1.0)).astype(np.float32)
    assert not np.array_equal(in_f16, source.astype(np.float32) + 1.0)  # the two ways differ
    np.testing.assert_array_equal(out["blk.0.attn_norm.weight"], in_f16)


@pytest.mark.parametrize("kind", ["gemma", "gemma2"])
def test_gemma_leaves_lm_head_out(tmp_path: Path, kind: str) -> None:
    folder, _ = write_gemma(tmp_path / kind, kind, tied=False)
    out = _convert(folder, "gguf:q8_0")
    assert "output.weight" not in out and "token_embd.weight" in out


def test_gemma3_writes_an_untied_lm_head(tmp_path: Path) -> None:
    folder, weights = write_gemma(tmp_path / "gemma3", "gemma3", tied=False)
    out = _convert(folder, "gguf:f16")
    lm_head = weights["lm_head.weight"].astype(np.float16)
    np.testing.assert_array_equal(out["output.weight"], lm_head)


def _fields(path: Path) -> dict[str, Any]:
    reader = gguf.GGUFReader(path)
    return {name: f.contents() for name, f in reader.fields.items() if not name.startswith("GGUF.")}


def _written(tmp_path: Path, kind: str, spec: Any = "gguf:bf16", **changes: Any) -> dict[str, Any]:
    pytest.importorskip("sentencepiece", reason="the llamacpp extra is not installed")
    folder, _ = write_gemma_with_tokenizer(tmp_path / f"tiny-{kind}", kind, **changes)
    dst = tmp_path / f"{kind}.gguf"
    lazyparams.convert(spec, folder, dst, progress=False)
    return _fields(dst)


_GEMMA_KEYS = [
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
]


def _model_keys(fields: dict[str, Any]) -> list[str]:
    arch = fields["general.architecture"]
    return [k for k in fields if k.startswith(f"{arch}.") or k == "general.file_type"]


def test_gemma_metadata_in_the_converters_order(tmp_path: Path) -> None:
    fields = _written(tmp_path, "gemma")
    assert _model_keys(fields) == [*(f"gemma.{k}" for k in _GEMMA_KEYS), "general.file_type"]
    assert fields["gemma.context_length"] == 8192
    assert fields["gemma.attention.head_count_kv"] == 2
    assert fields["gemma.attention.key_length"] == HEAD_DIM
    assert fields["general.file_type"] == 32
    # CodeGemma's end-of-turn id, on every Gemma; then no space prefix, last
    assert fields["tokenizer.ggml.eot_token_id"] == 107
    assert list(fields)[-1] == "tokenizer.ggml.add_space_prefix"
    assert fields["tokenizer.ggml.add_space_prefix"] is False
    assert fields["tokenizer.ggml.model"] == "llama"


def test_gemma2_metadata_soft_caps_after_the_file_type(tmp_path: Path) -> None:
    fields = _written(tmp_path, "gemma2", "gguf:f16")
    after = ["attn_logit_softcapping", "final_logit_softcapping", "attention.sliding_window"]
    assert _model_keys(fields) == [
        *(f"gemma2.{k}" for k in _GEMMA_KEYS),
        "general.file_type",
        *(f"gemma2.{k}" for k in after),
    ]
    assert fields["gemma2.attn_logit_softcapping"] == 50.0
    assert fields["gemma2.final_logit_softcapping"] == 30.0
    assert fields["gemma2.attention.sliding_window"] == 64
    assert fields["tokenizer.ggml.add_space_prefix"] is False
    assert "tokenizer.ggml.eot_token_id" not in fields


def test_gemma2_defaults_as_transformers_fills_them(tmp_path: Path) -> None:
    """Keys config.json leaves out take transformers' Gemma2Config defaults, which the
    converter reads."""
    pytest.importorskip("sentencepiece")
    folder, _ = write_gemma_with_tokenizer(tmp_path / "tiny-gemma2", "gemma2")
    config = json.loads((folder / "config.json").read_text())
    for key in ("attn_logit_softcapping", "final_logit_softcapping", "sliding_window"):
        del config[key]
    (folder / "config.json").write_text(json.dumps(config))
    lazyparams.convert("gguf:bf16", folder, tmp_path / "out.gguf", progress=False)
    fields = _fields(tmp_path / "out.gguf")
    assert fields["gemma2.attn_logit_softcapping"] == 50.0
    assert fields["gemma2.final_logit_softcapping"] == 30.0
    assert fields["gemma2.attention.sliding_window"] == 4096


def test_gemma3_metadata_shared_keys_then_its_own(tmp_path: Path) -> None:
    rope_scaling = {"rope_type": "linear", "factor": 8.0}
    fields = _written(tmp_path, "gemma3", rope_scaling=rope_scaling, final_logit_softcapping=30.0)
    shared = ["block_count", "context_length", "embedding_length", "feed_forward_length"]
    shared += ["attention.head_count", "attention.head_count_kv"]
    shared += ["rope.scaling.type", "rope.scaling.factor", "rope.freq_base", "rope.freq_base_swa"]
    shared += ["attention.layer_norm_rms_epsilon", "attention.key_length"]
    shared += ["attention.value_length"]
    own = ["final_logit_softcapping", "attention.sliding_window"]
    assert _model_keys(fields) == [
        *(f"gemma3.{k}" for k in shared),
        "general.file_type",
        *(f"gemma3.{k}" for k in own),
    ]
    assert fields["gemma3.rope.scaling.type"] == "linear"
    assert fields["gemma3.rope.freq_base"] == 1000000.0
    assert fields["gemma3.rope.freq_base_swa"] == 10000.0
    assert fields["gemma3.context_length"] == 32768
    assert fields["gemma3.attention.sliding_window"] == 64
    assert fields["tokenizer.ggml.add_space_prefix"] is False


def test_gemma3_all_global_layers_write_no_sliding_window(tmp_path: Path) -> None:
    fields = _written(tmp_path, "gemma3", sliding_window_pattern=1)
    assert "gemma3.attention.sliding_window" not in fields
    assert "gemma3.final_logit_softcapping" not in fields  # null in config.json


def test_gemma3_rope_parameters_as_transformers_saves_them(tmp_path: Path) -> None:
    """transformers 5 writes the rope settings per layer kind and drops the old keys."""
    rope = {
        "full_attention": {"rope_type": "default", "rope_theta": 500000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0},
    }
    fields = _written(
        tmp_path, "gemma3", rope_parameters=rope, rope_theta=None, rope_local_base_freq=None
    )
    assert fields["gemma3.rope.freq_base"] == 500000.0
    assert fields["gemma3.rope.freq_base_swa"] == 20000.0
    assert "gemma3.rope.scaling.type" not in fields


def test_gemma3_quantize_mixture_keeps_norms_plus_one(tmp_path: Path) -> None:
    folder, weights = write_gemma(tmp_path / "gemma3", "gemma3")
    out: dict[str, Any] = {}
    lazyparams.convert("gguf:q4_k_m", folder, out, progress=False)
    norm = out["blk.1.attn_q_norm.weight"]
    source = weights["model.layers.1.self_attn.q_norm.weight"].astype(np.float32)
    np.testing.assert_array_equal(norm, source + 1.0)


def test_gemma3_cuts_the_embedding_to_a_tokenizer_json(tmp_path: Path) -> None:
    """Without tokenizer.model, the embedding keeps the rows tokenizer.json has tokens for."""
    pytest.importorskip("tokenizers", reason="the llamacpp extra is not installed")
    from tokenizer_fixtures import write_bpe_tokenizer

    folder = tmp_path / "gemma3-bpe"
    tokens = write_bpe_tokenizer(folder, 300, "llama3")
    _, weights = write_gemma(folder, "gemma3", vocab=400)
    document = json.loads((folder / "tokenizer.json").read_text())
    count = len(document["model"]["vocab"]) + len(document["added_tokens"])
    assert count == tokens < 400
    dst = tmp_path / "out.gguf"
    lazyparams.convert(GGUFTarget("bf16", pre="llama-bpe"), folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert [int(d) for d in embd.shape] == [64, count]
    fields = _fields(dst)
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert "tokenizer.ggml.add_space_prefix" not in fields
    out = _convert(folder)
    embedding = weights["model.embed_tokens.weight"][:count].astype(np.float32)
    np.testing.assert_array_equal(out["token_embd.weight"], embedding)


def test_sliding_rope_theta_reads_split_settings_or_a_local_key() -> None:
    split = {"sliding_attention": {"rope_theta": 1.0}, "full_attention": {"rope_theta": 2.0}}
    assert sliding_rope_theta({"rope_parameters": split}) == 1.0
    assert sliding_rope_theta({"rope_local_base_freq": 3.0, "rope_scaling": None}) == 3.0
    # split settings without a sliding entry win over a local key, as the converter reads them
    assert (
        sliding_rope_theta({"rope_parameters": {"full_attention": {}}, "swa_rope_theta": 4}) is None
    )
    assert sliding_rope_theta({"rope_theta": 5.0}) is None


def _refused(folder: Path, spec: Any = "gguf:bf16") -> str:
    dst = folder.parent / "refused.gguf"
    with pytest.raises(LazyParamsError) as info:
        lazyparams.convert(spec, folder, dst, progress=False)
    assert not dst.exists()
    return str(info.value)


def test_gemma3_attention_soft_cap_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("sentencepiece")
    folder, _ = write_gemma_with_tokenizer(
        tmp_path / "gemma3", "gemma3", attn_logit_softcapping=50.0
    )
    message = _refused(folder)
    assert "config.json" in message and "'attn_logit_softcapping'" in message and "50.0" in message


def test_gemma_null_hyperparameter_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("sentencepiece")
    folder, _ = write_gemma_with_tokenizer(tmp_path / "gemma", "gemma", rms_norm_eps=None)
    message = _refused(folder)
    assert "config.json" in message and "'rms_norm_eps'" in message and "None" in message


def test_missing_norm_is_refused_by_name(tmp_path: Path) -> None:
    folder, weights = write_gemma(tmp_path / "gemma2", "gemma2")
    del weights["model.layers.2.pre_feedforward_layernorm.weight"]
    from hf_fixtures import write_checkpoint

    config = json.loads((folder / "config.json").read_text())
    for file in folder.glob("model-*"):
        file.unlink()
    write_checkpoint(folder, weights, config, shards=2)
    message = _refused(folder, "gguf:f16")
    assert "model.layers.2.pre_feedforward_layernorm.weight" in message and "missing" in message


def test_gemma3_unreadable_tokenizer_json_is_named(tmp_path: Path) -> None:
    folder, _ = write_gemma(tmp_path / "gemma3", "gemma3")
    (folder / "tokenizer.json").write_text("{not json")
    message = _refused(folder)
    assert "tokenizer.json" in message
