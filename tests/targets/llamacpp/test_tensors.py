"""The gguf target's tensors: llama.cpp's names, transforms and types, and every refusal."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hf_fixtures import SHAPES, config_of, random_weights, write_checkpoint, write_model

import lazyparams
from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget


def _permuted(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter's rotary permutation, written out for the check."""
    rows = w.shape[0]
    return w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


@pytest.mark.parametrize("kind", ["llama", "mistral"])
def test_llama_names_and_rotary_permutation(tmp_path: Path, kind: str) -> None:
    shape = SHAPES[kind]
    weights = random_weights(shape)
    folder = write_checkpoint(tmp_path / kind, weights, config_of(shape))
    out = _convert(folder)
    layer = "model.layers.1.self_attn"
    np.testing.assert_array_equal(
        out["blk.1.attn_q.weight"], _permuted(_f32(weights[f"{layer}.q_proj.weight"]), shape.heads)
    )
    np.testing.assert_array_equal(
        out["blk.1.attn_k.weight"],
        _permuted(_f32(weights[f"{layer}.k_proj.weight"]), shape.kv_heads),
    )
    np.testing.assert_array_equal(
        out["blk.1.attn_v.weight"], _f32(weights[f"{layer}.v_proj.weight"])
    )
    expected = {"token_embd.weight", "output_norm.weight", "output.weight"}
    for i in range(shape.layers):
        for kind_name in (
            "attn_norm",
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_norm",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ):
            expected.add(f"blk.{i}.{kind_name}.weight")
    assert set(out) == expected


def test_qwen2_keeps_biases_in_f32_and_ties_embeddings(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "qwen2", "qwen2")
    out: dict[str, Any] = {}
    report = lazyparams.convert("gguf:f16", folder, out, progress=False)
    assert "output.weight" not in out
    assert out["blk.0.attn_q.bias"].dtype == np.float32
    assert out["blk.0.attn_q.weight"].dtype == np.float16
    assert out["blk.0.attn_norm.weight"].dtype == np.float32
    assert report.plan.target[0] == ("architecture", "Qwen2ForCausalLM -> qwen2")


def test_qwen3_head_norms(tmp_path: Path) -> None:
    shape = SHAPES["qwen3"]
    weights = random_weights(shape)
    folder = write_checkpoint(tmp_path / "qwen3", weights, config_of(shape))
    out = _convert(folder, "gguf:bf16")
    norm = out["blk.1.attn_q_norm.weight"]
    assert norm.dtype == np.float32 and norm.shape == (shape.dim,)
    # qwen3's q/k are not permuted
    assert out["blk.1.attn_q.weight"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(
        out["blk.1.attn_q.weight"], weights["model.layers.1.self_attn.q_proj.weight"]
    )


def test_mixtral_experts_stack_across_shards(tmp_path: Path) -> None:
    shape = SHAPES["mixtral"]
    weights = random_weights(shape)
    folder = write_checkpoint(tmp_path / "mixtral", weights, config_of(shape), shards=3)
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    expert_files = {
        index[f"model.layers.0.block_sparse_moe.experts.{x}.w2.weight"] for x in range(4)
    }
    assert len(expert_files) > 1 or len(set(index.values())) == 3
    out = _convert(folder)
    stacked = out["blk.0.ffn_down_exps.weight"]
    assert stacked.shape == (4, shape.hidden, shape.intermediate)
    for x in range(4):
        member = weights[f"model.layers.0.block_sparse_moe.experts.{x}.w2.weight"]
        np.testing.assert_array_equal(stacked[x], _f32(member))
    assert out["blk.0.ffn_gate_inp.weight"].dtype == np.float32


def test_mixtral_router_stays_f32_at_f16(tmp_path: Path) -> None:
    out = _convert(write_model(tmp_path / "m", "mixtral"), "gguf:f16")
    assert out["blk.1.ffn_gate_inp.weight"].dtype == np.float32
    assert out["blk.1.ffn_up_exps.weight"].dtype == np.float16


def test_auto_type_follows_the_first_matrix(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    weights = {n: w.astype(np.float16) for n, w in random_weights(shape).items()}
    folder = write_checkpoint(tmp_path / "f16", weights, config_of(shape))
    write_byte_tokenizer(folder)  # a plan checks the tokenizer, as a conversion does
    plan = lazyparams.plan(GGUFTarget(pre=DEMO_PRE), folder)
    assert dict(plan.target)["output type"] == "f16 (general.file_type 1)"
    bf16_folder = write_model(tmp_path / "bf16", "llama")
    write_byte_tokenizer(bf16_folder)
    bf16 = lazyparams.plan(GGUFTarget(pre=DEMO_PRE), bf16_folder)
    assert dict(bf16.target)["output type"] == "bf16 (general.file_type 32)"


def test_plan_shows_groups_before_reading_data(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama")
    for shard in folder.glob("*.safetensors"):
        header = shard.read_bytes()[: 8 + int.from_bytes(shard.read_bytes()[:8], "little")]
        shard.write_bytes(header + b"\0" * (shard.stat().st_size - len(header)))
    write_byte_tokenizer(folder)
    plan = lazyparams.plan(GGUFTarget("f16", pre=DEMO_PRE), folder)
    rows = dict(plan.target)
    assert rows["blk.*.attn_q.weight"] == "float16 x2"
    assert rows["blk.*.attn_norm.weight"] == "float32 x2"
    assert plan.predicted_peak_bytes > 0


def _expect_refusal(tmp_path: Path, folder: Path, spec: str, *needles: str) -> None:
    dst = tmp_path / "out.gguf"
    with pytest.raises(LazyParamsError) as info:
        lazyparams.convert(spec, folder, dst, progress=False)
    message = str(info.value)
    for needle in needles:
        assert needle in message
    assert not dst.exists()
    assert not any(p.name.startswith(".out.gguf") for p in tmp_path.iterdir())


def test_no_config_is_refused(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama")
    (folder / "config.json").unlink()
    _expect_refusal(tmp_path, folder, "gguf", "config.json", "not found")


def test_unsupported_architecture_lists_the_supported(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama", extra={"architectures": ["GPT2LMHeadModel"]})
    _expect_refusal(
        tmp_path, folder, "gguf", "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM"
    )


def test_head_count_that_does_not_divide_the_rows(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    config = {**config_of(shape), "num_attention_heads": 3}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    _expect_refusal(tmp_path, folder, "gguf:f16", "proj.weight", "num_attention_heads 3")


def test_missing_layer_is_named(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    config = {**config_of(shape), "num_hidden_layers": 3}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    _expect_refusal(tmp_path, folder, "gguf", "model.layers.2.", "missing", "3 layers")


def test_extra_layer_is_named(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    config = {**config_of(shape), "num_hidden_layers": 1}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    _expect_refusal(tmp_path, folder, "gguf", "layer 1", "1 layers")


def test_expert_count_that_disagrees(tmp_path: Path) -> None:
    shape = SHAPES["mixtral"]
    config = {**config_of(shape), "num_local_experts": 8}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    _expect_refusal(tmp_path, folder, "gguf", "experts 0..7", "8 experts", "[0, 1, 2, 3]")


def test_unknown_tensor_is_named(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    weights = random_weights(shape)
    weights["model.layers.0.mlp.extra.weight"] = weights["model.norm.weight"]
    folder = write_checkpoint(tmp_path / "m", weights, config_of(shape))
    _expect_refusal(tmp_path, folder, "gguf", "model.layers.0.mlp.extra.weight")


def test_vocab_size_that_disagrees_with_the_embedding(tmp_path: Path) -> None:
    shape = SHAPES["llama"]
    config = {**config_of(shape), "vocab_size": 1000}
    folder = write_checkpoint(tmp_path / "m", random_weights(shape), config)
    _expect_refusal(tmp_path, folder, "gguf", "embed_tokens", "vocab_size=1000")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [("gguf:q9_9", "unknown type 'q9_9'"), ("gguf+cast:float16", "composes with nothing")],
)
def test_bad_recipe_arguments(tmp_path: Path, spec: str, needle: str) -> None:
    _expect_refusal(tmp_path, write_model(tmp_path / "m", "llama"), spec, needle)


def test_llama3_rope_scaling_writes_rope_freqs(tmp_path: Path) -> None:
    """llama 3's rope factors: 1 for short wavelengths, `factor` for the longest, smoothed
    between, as one float32 tensor written first."""
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    folder = write_model(tmp_path / "m", "llama", extra={"rope_scaling": scaling})
    out = _convert(folder, "gguf:f16")
    factors = out["rope_freqs.weight"]
    assert next(iter(out)) == "rope_freqs.weight"
    assert factors.dtype == np.float32 and factors.shape == (SHAPES["llama"].dim // 2,)
    assert factors[0] == 1.0 and factors[-1] == 8.0
    assert np.all(np.diff(factors) >= 0)
