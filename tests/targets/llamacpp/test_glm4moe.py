"""GLM-4.5 (glm4moe): tensors as llama.cpp's converter writes them (dense lead, stacked experts,
shared experts, F32 router, the multi-token-prediction layer kept), its metadata and GLM's
special tokens read back with gguf-py, and the refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_moe import EXPERTS, LAYERS, glm4moe_layout, random_tensors, write_glm_tokenizer
from hf_fixtures import write_checkpoint

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")


def _folder(tmp_path: Path, mtp: bool = False) -> tuple[Path, dict[str, np.ndarray]]:
    config, shapes = glm4moe_layout(mtp)
    weights = random_tensors(shapes)
    return write_checkpoint(tmp_path / "glm", weights, config, shards=3), weights


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_dense_lead_experts_and_router(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path)
    out = _convert(folder, "gguf:f16")
    names = list(out)
    assert "blk.0.ffn_up.weight" in out and "blk.0.ffn_up_exps.weight" not in out
    for layer in (1, 2):
        for x in range(EXPERTS):
            member = weights[f"model.layers.{layer}.mlp.experts.{x}.gate_proj.weight"]
            gate = out[f"blk.{layer}.ffn_gate_exps.weight"][x]
            np.testing.assert_array_equal(gate, member.astype(np.float16))
        stacks = [names.index(f"blk.{layer}.ffn_{p}_exps.weight") for p in ("down", "gate", "up")]
        assert stacks == list(range(stacks[0], stacks[0] + 3))
        assert out[f"blk.{layer}.ffn_gate_inp.weight"].dtype == np.float32
        assert out[f"blk.{layer}.exp_probs_b.bias"].dtype == np.float32
        assert out[f"blk.{layer}.ffn_down_shexp.weight"].dtype == np.float16
    assert out["blk.0.post_attention_norm.weight"].dtype == np.float32
    assert out["blk.0.attn_q.bias"].dtype == np.float32
    # GLM's q/k rows are already in llama.cpp's order: no rotary permutation
    exact = _convert(folder)
    q = weights["model.layers.1.self_attn.q_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(exact["blk.1.attn_q.weight"], q)
    assert not any(name.startswith(f"blk.{LAYERS}.") for name in exact)


def test_prediction_layer_is_kept(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path, mtp=True)
    out = _convert(folder, "gguf:q8_0")
    mtp = f"blk.{LAYERS}."
    for name in ("nextn.eh_proj", "nextn.embed_tokens", "nextn.shared_head_head", "attn_q"):
        assert out[f"{mtp}{name}.weight"].dtype == np.uint8  # q8_0 blocks
    for name in ("nextn.enorm", "nextn.hnorm", "nextn.shared_head_norm"):
        assert out[f"{mtp}{name}.weight"].dtype == np.float32
    assert out[f"{mtp}ffn_up_exps.weight"].shape[0] == EXPERTS
    exact = _convert(folder)
    eh = weights[f"model.layers.{LAYERS}.eh_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(exact[f"{mtp}nextn.eh_proj.weight"], eh)


def test_llama_quantize_mixture(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path, mtp=True)
    out = _convert(folder, "gguf:q4_k_m")
    assert out["blk.1.ffn_gate_inp.weight"].dtype == np.float32
    assert out["blk.1.ffn_up_exps.weight"].dtype == np.uint8


def _read(tmp_path: Path, mtp: bool, spec: str = "q8_0") -> dict[str, Any]:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    folder, _ = _folder(tmp_path, mtp)
    write_glm_tokenizer(folder, 300)
    dst = tmp_path / "glm.gguf"
    lazyparams.convert(GGUFTarget(spec, pre="glm4"), folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    return {name: field.contents() for name, field in reader.fields.items()}


def test_metadata_and_special_tokens(tmp_path: Path) -> None:
    fields = _read(tmp_path, mtp=True)
    a = "glm4moe."
    expected = {
        "block_count": LAYERS + 1,  # the prediction layer counts
        "attention.key_length": 32,
        "rope.dimension_count": 16,  # half of each head rotates
        "expert_count": EXPERTS,
        "expert_feed_forward_length": 32,
        "expert_shared_count": 1,
        "leading_dense_block_count": 1,
        "expert_gating_func": 2,  # sigmoid
        "expert_weights_scale": 2.5,
        "expert_weights_norm": True,
        "nextn_predict_layers": 1,
    }
    for key, value in expected.items():
        assert fields[a + key] == pytest.approx(value), key
    keys = [k for k in fields if k.startswith(a)]
    assert keys[0] == a + "block_count" and keys[-1] == a + "nextn_predict_layers"
    tokens = fields["tokenizer.ggml.tokens"]
    assert tokens[fields["tokenizer.ggml.bos_token_id"]] == "[gMASK]"
    assert tokens[fields["tokenizer.ggml.eot_token_id"]] == "<|user|>"
    assert tokens[fields["tokenizer.ggml.eom_token_id"]] == "<|observation|>"
    assert tokens[fields["tokenizer.ggml.unknown_token_id"]] == "<|endoftext|>"


def test_config_defaults_as_transformers_loads_them(tmp_path: Path) -> None:
    """A config.json without the MoE keys' defaults writes them as Glm4MoeConfig gives them."""
    folder, _ = _folder(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    for key in ("num_nextn_predict_layers", "n_group", "topk_group", "rope_parameters"):
        del config[key]
    config.update(rope_theta=10000.0, partial_rotary_factor=0.5)
    (folder / "config.json").write_text(json.dumps(config))
    write_glm_tokenizer(folder, 300)
    dst = tmp_path / "defaults.gguf"
    pytest.importorskip("tokenizers")
    lazyparams.convert(GGUFTarget("f16", pre="glm4"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    assert fields["glm4moe.block_count"] == LAYERS + 1
    assert fields["glm4moe.expert_group_count"] == 1
    assert fields["glm4moe.rope.dimension_count"] == 16


def test_refusals(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path / "partial", mtp=True)
    del weights[f"model.layers.{LAYERS}.self_attn.q_proj.weight"]
    config = json.loads((folder / "config.json").read_text())
    partial = write_checkpoint(tmp_path / "partial2", weights, config)
    with pytest.raises(LazyParamsError, match=rf"model\.layers\.{LAYERS}\.self_attn\.q_proj"):
        _convert(partial)
    config["num_nextn_predict_layers"] = 0
    past = write_checkpoint(tmp_path / "past", random_tensors(glm4moe_layout(True)[1]), config)
    with pytest.raises(LazyParamsError, match=rf"is in layer {LAYERS}, but .* has {LAYERS} layers"):
        _convert(past)
    tokenizer = tmp_path / "plain"
    folder, _ = _folder(tmp_path / "tok")
    from tokenizer_fixtures import write_bpe_tokenizer

    pytest.importorskip("tokenizers")
    write_bpe_tokenizer(tokenizer, 300, "qwen2")
    for file in tokenizer.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    with pytest.raises(LazyParamsError, match=r"\[gMASK\].*not among its added tokens"):
        lazyparams.convert(GGUFTarget("f16", pre="glm4"), folder, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()
