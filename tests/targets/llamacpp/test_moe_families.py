"""DeepSeek-V2/V3 (deepseek2) and Qwen2/Qwen3-MoE: tensors as llama.cpp's converter writes them
(MLA's kv_b split, stacked experts, shared experts, F32 routers, the dense lead, multi-token
prediction left out), their metadata read back with gguf-py, and every refusal."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hf_fixtures import SHAPES, config_of, random_weights, write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.checks import refused

gguf = pytest.importorskip("gguf")


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _folder(tmp_path: Path, kind: str, **changes: Any) -> tuple[Path, dict[str, np.ndarray]]:
    shape = replace(SHAPES[kind], **changes)
    weights = random_weights(shape)
    return write_checkpoint(tmp_path / kind, weights, config_of(shape), shards=3), weights


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


@pytest.mark.parametrize("kind", ["deepseek_v2", "deepseek_v3"])
def test_deepseek_kv_b_splits_into_k_b_and_v_b(tmp_path: Path, kind: str) -> None:
    """kv_b_proj's rows are per head [nope key rows, value rows]; k_b is the key part with its
    last two axes swapped, v_b the value part, both 3-D with the head first."""
    folder, weights = _folder(tmp_path, kind)
    out = _convert(folder)
    x = SHAPES[kind].extra
    heads, nope, value, rank = 4, x["qk_nope_head_dim"], x["v_head_dim"], x["kv_lora_rank"]
    for layer in range(3):
        kv_b = _f32(weights[f"model.layers.{layer}.self_attn.kv_b_proj.weight"])
        per_head = kv_b.reshape(heads, nope + value, rank)
        k_b, v_b = out[f"blk.{layer}.attn_k_b.weight"], out[f"blk.{layer}.attn_v_b.weight"]
        assert k_b.shape == (heads, rank, nope) and v_b.shape == (heads, value, rank)
        np.testing.assert_array_equal(k_b, per_head[:, :nope, :].transpose(0, 2, 1))
        np.testing.assert_array_equal(v_b, per_head[:, nope:, :])
        assert f"blk.{layer}.attn_kv_b.weight" not in out


def test_deepseek_v3_layers_dense_lead_then_experts(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path, "deepseek_v3")
    out = _convert(folder, "gguf:f16")
    names = list(out)
    assert "blk.0.ffn_gate.weight" in out and "blk.0.ffn_gate_exps.weight" not in out
    for layer in (1, 2):
        for x in range(4):
            member = weights[f"model.layers.{layer}.mlp.experts.{x}.down_proj.weight"]
            np.testing.assert_array_equal(
                out[f"blk.{layer}.ffn_down_exps.weight"][x], member.astype(np.float16)
            )
        assert out[f"blk.{layer}.ffn_gate_inp.weight"].dtype == np.float32
        bias = out[f"blk.{layer}.exp_probs_b.bias"]
        assert bias.dtype == np.float32 and bias.shape == (4,)
        np.testing.assert_array_equal(
            bias, _f32(weights[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"])
        )
        assert out[f"blk.{layer}.ffn_up_shexp.weight"].dtype == np.float16
        # the converter writes a layer's stacks down, gate, up, where its last expert was read
        stacks = [names.index(f"blk.{layer}.ffn_{p}_exps.weight") for p in ("down", "gate", "up")]
        assert stacks == list(range(stacks[0], stacks[0] + 3))
        assert names.index(f"blk.{layer}.attn_k_b.weight") + 1 == names.index(
            f"blk.{layer}.attn_v_b.weight"
        )
    assert out["blk.1.attn_q_a_norm.weight"].dtype == np.float32
    assert out["blk.1.attn_kv_a_mqa.weight"].dtype == np.float16


def test_deepseek_multi_token_prediction_layer_is_left_out(tmp_path: Path) -> None:
    shape = SHAPES["deepseek_v3"]
    weights = random_weights(shape)
    mtp = "model.layers.3."
    for name, array in list(weights.items()):
        if name.startswith("model.layers.2."):
            weights[name.replace("model.layers.2.", mtp)] = array
    weights[mtp + "eh_proj.weight"] = weights["model.layers.2.mlp.gate.weight"]
    weights[mtp + "shared_head.head.weight"] = weights["lm_head.weight"]
    folder = write_checkpoint(tmp_path / "mtp", weights, config_of(shape))
    out = _convert(folder, "gguf:bf16")
    assert not any(name.startswith("blk.3.") for name in out)
    assert "blk.2.ffn_up_exps.weight" in out


@pytest.mark.parametrize("kind", ["qwen2_moe", "qwen3_moe"])
def test_qwen_moe_experts_and_routers(tmp_path: Path, kind: str) -> None:
    folder, weights = _folder(tmp_path, kind)
    out = _convert(folder, "gguf:q8_0")
    up = out["blk.1.ffn_up_exps.weight"]
    # q8_0 comes as its blocks' bytes: 34 per 32 values of a row
    assert up.dtype == np.uint8 and up.shape == (4, 32, 64 // 32 * 34)
    assert out["blk.1.ffn_gate_inp.weight"].dtype == np.float32
    if kind == "qwen2_moe":
        assert out["blk.0.ffn_gate_inp_shexp.weight"].dtype == np.float32
        assert out["blk.0.ffn_down_shexp.weight"].shape == (64, 96 // 32 * 34)
        assert out["blk.0.attn_q.bias"].dtype == np.float32
        assert "blk.0.attn_q_norm.weight" not in out
    else:
        assert "blk.0.ffn_gate_shexp.weight" not in out
        assert out["blk.0.attn_k_norm.weight"].dtype == np.float32
    # Qwen's families keep Hugging Face's q/k rows (no rotary permutation)
    exact = _convert(folder)
    for p in ("q", "k"):
        hf = _f32(weights[f"model.layers.0.self_attn.{p}_proj.weight"])
        np.testing.assert_array_equal(exact[f"blk.0.attn_{p}.weight"], hf)


def _read(tmp_path: Path, kind: str, spec: str, pre: str, **changes: Any) -> Any:
    """Convert a fixture with a trained BPE tokenizer to a file; its reader and KV pairs."""
    tokenizer = tmp_path / "tokenizer"
    vocab = write_bpe_tokenizer(tokenizer, 400, "qwen2" if kind.startswith("qwen") else "llama3")
    folder, _ = _folder(tmp_path, kind, vocab=vocab, **changes)
    for file in tokenizer.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    dst = tmp_path / f"{kind}.gguf"
    lazyparams.convert(GGUFTarget(spec, pre=pre), folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    return reader, {name: field.contents() for name, field in reader.fields.items()}


def test_deepseek_v3_metadata(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    reader, fields = _read(tmp_path, "deepseek_v3", "q8_0", "deepseek-v3")
    a = "deepseek2."
    assert fields["general.architecture"] == "deepseek2"
    expected = {
        "attention.head_count": 4,
        "attention.head_count_kv": 1,  # MLA written as MQA
        "attention.q_lora_rank": 48,
        "attention.kv_lora_rank": 32,
        "attention.key_length": 32 + 16,
        "attention.value_length": 32,
        "attention.key_length_mla": 32 + 16,
        "attention.value_length_mla": 32,
        "leading_dense_block_count": 1,
        "expert_count": 4,
        "expert_used_count": 2,
        "expert_shared_count": 1,
        "expert_feed_forward_length": 32,
        "expert_group_count": 2,
        "expert_group_used_count": 1,
        "expert_gating_func": 2,  # sigmoid
        "expert_weights_norm": True,
        "rope.dimension_count": 16,
        "rope.scaling.type": "yarn",
        "rope.scaling.original_context_length": 128,
        "vocab_size": 400,
    }
    assert {key: fields[a + key] for key in expected} == expected
    assert fields[a + "expert_weights_scale"] == pytest.approx(2.5)
    assert fields[a + "rope.scaling.yarn_log_multiplier"] == pytest.approx(0.0707, rel=1e-6)
    # key_length sits where transformers' head_dim put it, before the file type
    keys = list(fields)
    assert keys.index(a + "attention.key_length") < keys.index("general.file_type")
    assert keys.index("general.file_type") < keys.index(a + "leading_dense_block_count")
    assert fields["tokenizer.ggml.pre"] == "deepseek-v3"
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.1.ffn_gate_exps.weight"] == "Q8_0"
    assert types["blk.1.attn_k_b.weight"] == "Q8_0"  # rows of qk_nope_head_dim=32 fill blocks
    assert types["blk.1.ffn_gate_inp.weight"] == "F32"
    assert types["blk.1.exp_probs_b.bias"] == "F32"


@pytest.mark.parametrize("kind", ["qwen2_moe", "qwen3_moe"])
def test_qwen_moe_metadata(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    reader, fields = _read(tmp_path, kind, "bf16", "qwen2")
    arch = kind.replace("_", "")
    assert fields["general.architecture"] == arch
    assert fields[f"{arch}.expert_count"] == 4
    assert fields[f"{arch}.expert_used_count"] == 2
    assert fields[f"{arch}.expert_feed_forward_length"] == 32
    if kind == "qwen2_moe":
        assert fields[f"{arch}.expert_shared_feed_forward_length"] == 96
        assert f"{arch}.attention.key_length" not in fields
    else:
        assert fields[f"{arch}.attention.key_length"] == 32
        assert f"{arch}.expert_shared_feed_forward_length" not in fields
    assert fields["general.size_label"].startswith("4x")
    assert {t.name for t in reader.tensors} >= {"blk.1.ffn_down_exps.weight", "output.weight"}


def test_deepseek_q4_k_m_mixture(tmp_path: Path) -> None:
    """llama-quantize's types on deepseek2: routers and norms kept, experts and the MLA
    projections k-quantized where their rows fill 256-blocks, else the fallback."""
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    reader, fields = _read(tmp_path, "deepseek_v3", "Q4_K_M", "deepseek-v3", hidden=256)
    assert fields["general.file_type"] == gguf.LlamaFileType.MOSTLY_Q4_K_M
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.1.ffn_gate_inp.weight"] == "F32"
    assert types["blk.1.attn_kv_a_norm.weight"] == "F32"
    assert types["blk.1.ffn_gate_exps.weight"] == "Q4_K"
    assert types["blk.1.attn_q_a.weight"] == "Q4_K"
    assert types["blk.1.attn_k_b.weight"] == "Q5_0"  # rows of 32 fall back from Q4_K
    assert types["output.weight"] == "Q6_K"


def test_kv_b_rows_that_contradict_the_config(tmp_path: Path) -> None:
    shape = SHAPES["deepseek_v3"]
    config = {**config_of(shape), "v_head_dim": 16}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    refused(tmp_path, folder, "kv_b_proj.weight", "v_head_dim=16", "rows")


def test_experts_in_a_layer_the_config_makes_dense(tmp_path: Path) -> None:
    shape = SHAPES["deepseek_v3"]
    config = {**config_of(shape), "first_k_dense_replace": 2}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    refused(tmp_path, folder, "model.layers.1.", "layer 1", "dense")


def test_dense_mlp_in_an_expert_layer(tmp_path: Path) -> None:
    shape = SHAPES["deepseek_v3"]
    config = {**config_of(shape), "first_k_dense_replace": 0}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    refused(tmp_path, folder, "model.layers.0.mlp.", "dense", "a mixture-of-experts layer")


def test_deepseek_expert_count_that_disagrees(tmp_path: Path) -> None:
    shape = SHAPES["deepseek_v3"]
    config = {**config_of(shape), "n_routed_experts": 6}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    refused(tmp_path, folder, "experts 0..5", "6 experts", "[0, 1, 2, 3]")


def test_unknown_gating_function(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    with pytest.raises(LazyParamsError) as info:
        extra = {**SHAPES["deepseek_v3"].extra, "scoring_func": "relu"}
        _read(tmp_path, "deepseek_v3", "f16", "deepseek-v3", extra=extra)
    assert "'scoring_func'" in str(info.value) and "softmax, sigmoid" in str(info.value)


def test_qwen_moe_dense_layer_isrefused(tmp_path: Path) -> None:
    """llama.cpp's qwen2moe has no dense feed-forward: a layer with one cannot be written."""
    shape = SHAPES["qwen2_moe"]
    weights = random_weights(shape)
    h, f = shape.hidden, shape.intermediate
    dense = np.zeros((f, h), dtype=weights["model.norm.weight"].dtype)
    weights["model.layers.1.mlp.gate_proj.weight"] = dense
    folder = write_checkpoint(tmp_path / "m", weights, config_of(shape))
    refused(tmp_path, folder, "model.layers.1.mlp.gate_proj.weight", "qwen2moe")
