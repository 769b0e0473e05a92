"""extract_lora: the adapter mergekit-extract-lora makes (truncated SVD of each linear
weight's difference, the singular values split evenly between A and B, scale 1), against
numpy's own SVD; its configuration read back by our adapter reader; a round trip through
merge_lora."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.io.lora_adapter import read_adapter_config
from tests.targets.lora.peft_reference import BF16, F32, PREFIX, base_tensors, write_base

LINEAR = ("q_proj", "v_proj", "up_proj", "down_proj")


def finetune(weights: dict[str, np.ndarray], rank: int, seed: int) -> dict[str, np.ndarray]:
    """The base moved by a random difference of `rank` on every linear weight, and by a full
    one on everything else."""
    rng = np.random.default_rng(seed)
    tuned = {}
    for name, weight in weights.items():
        if weight.ndim == 2 and name.rsplit(".", 2)[-2] in LINEAR:
            rows, cols = weight.shape
            step = rng.standard_normal((rows, rank)) @ rng.standard_normal((rank, cols))
        else:
            step = rng.standard_normal(weight.shape)
        tuned[name] = (weight.astype(F32) + (0.1 * step).astype(F32)).astype(weight.dtype)
    return tuned


def extracted(
    tmp_path: Path, rank: int, dtype: object = F32, **options: object
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, object]]:
    """(base, fine-tuned, adapter tensors, adapter config) of an extraction of `rank`."""
    weights = base_tensors(dtype=dtype)
    tuned = finetune(weights, 2, seed=3)
    write_base(tmp_path / "base", weights)
    write_base(tmp_path / "tuned", tuned)
    out = tmp_path / "adapter"
    lazyparams.extract_lora(
        tmp_path / "base", tmp_path / "tuned", out, rank, progress=False, **options
    )
    config = json.loads((out / "adapter_config.json").read_text())
    return weights, tuned, load_file(str(out / "adapter_model.safetensors")), config


def svd_factors(delta: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    u, s, vh = np.linalg.svd(delta.astype(F32), full_matrices=False)
    root = np.sqrt(s[:rank])
    return (root[:, None] * vh[:rank]).astype(delta.dtype), (u[:, :rank] * root).astype(delta.dtype)


def test_each_linear_weight_gets_the_truncated_svd_of_its_difference(tmp_path):
    weights, tuned, adapter, config = extracted(tmp_path, 2)
    linear = [n for n in weights if weights[n].ndim == 2 and n.rsplit(".", 2)[-2] in LINEAR]
    assert sorted(adapter) == sorted(
        f"{PREFIX}{n.removesuffix('.weight')}.lora_{x}.weight" for n in linear for x in "AB"
    )
    for name in linear:
        module = f"{PREFIX}{name.removesuffix('.weight')}"
        a, b = adapter[f"{module}.lora_A.weight"], adapter[f"{module}.lora_B.weight"]
        want_a, want_b = svd_factors(tuned[name] - weights[name], 2)
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)
        np.testing.assert_allclose(b @ a, tuned[name] - weights[name], atol=2e-5)
    assert config["r"] == config["lora_alpha"] == 2
    assert config["target_modules"] == sorted(LINEAR)
    assert config["modules_to_save"] == [] and config["rank_pattern"] == {}
    assert config["peft_type"] == "LORA" and config["base_model_name_or_path"] == str(
        tmp_path / "base"
    )


def test_a_rank_above_a_weight_size_is_cut_and_goes_to_rank_pattern(tmp_path):
    _, _, adapter, config = extracted(tmp_path, 6)
    assert config["r"] == config["lora_alpha"] == 6
    smaller = {f"model.layers.{i}.self_attn.v_proj": 4 for i in range(2)}  # v_proj is (4, 8)
    assert config["rank_pattern"] == config["alpha_pattern"] == smaller
    assert adapter[f"{PREFIX}model.layers.1.self_attn.v_proj.lora_A.weight"].shape == (4, 8)
    read = read_adapter_config(tmp_path / "adapter")
    for module in ("model.layers.1.self_attn.v_proj", "model.layers.1.self_attn.q_proj"):
        assert read.scaling(module) == 1.0


def test_embeddings_are_left_out_unless_asked_and_saved_modules_kept_whole(tmp_path):
    weights, tuned, adapter, config = extracted(tmp_path, 2, embed_lora=True, save_modules=["norm"])
    embed = f"{PREFIX}model.embed_tokens"
    assert adapter[f"{embed}.lora_embedding_A"].shape == (2, 16)  # (r, vocab)
    assert adapter[f"{embed}.lora_embedding_B"].shape == (8, 2)  # (hidden, r)
    want_a, want_b = svd_factors(
        (tuned["model.embed_tokens.weight"] - weights["model.embed_tokens.weight"]).T, 2
    )
    np.testing.assert_array_equal(adapter[f"{embed}.lora_embedding_A"], want_a)
    np.testing.assert_array_equal(adapter[f"{embed}.lora_embedding_B"], want_b)
    assert adapter[f"{PREFIX}lm_head.lora_A.weight"].shape == (2, 8)
    np.testing.assert_array_equal(adapter[f"{PREFIX}model.norm.weight"], tuned["model.norm.weight"])
    assert f"{PREFIX}model.layers.0.input_layernorm.weight" not in adapter
    assert config["modules_to_save"] == ["norm"]
    assert {"embed_tokens", "lm_head"} <= set(config["target_modules"])


def test_bfloat16_models_give_a_bfloat16_adapter_of_their_difference(tmp_path):
    weights, tuned, adapter, _ = extracted(tmp_path, 2, dtype=BF16)
    name = "model.layers.1.mlp.down_proj.weight"
    delta = tuned[name] - weights[name]  # in bfloat16, as mergekit takes it
    assert delta.dtype == BF16
    a, b = svd_factors(delta, 2)
    np.testing.assert_array_equal(adapter[f"{PREFIX}model.layers.1.mlp.down_proj.lora_A.weight"], a)
    np.testing.assert_array_equal(adapter[f"{PREFIX}model.layers.1.mlp.down_proj.lora_B.weight"], b)


def test_a_full_rank_extraction_merges_back_to_the_finetuned_model(tmp_path):
    weights, tuned, _, _ = extracted(tmp_path, 12)
    lazyparams.merge_lora(
        tmp_path / "base", tmp_path / "adapter", tmp_path / "merged", progress=False
    )
    merged = load_file(str(tmp_path / "merged" / "model.safetensors"))
    for name, weight in weights.items():
        want = tuned[name] if weight.ndim == 2 and name.rsplit(".", 2)[-2] in LINEAR else weight
        np.testing.assert_allclose(merged[name], want, atol=2e-5)


def test_models_that_do_not_match_are_refused_and_nothing_written(tmp_path):
    weights = base_tensors()
    write_base(tmp_path / "base", weights)
    other = dict(weights)
    other["model.layers.0.self_attn.q_proj.weight"] = np.zeros((8, 4), F32)
    write_base(tmp_path / "other", other)
    out = tmp_path / "adapter"
    with pytest.raises(
        LazyParamsError,
        match=r"is \(8, 4\) float32 in the fine-tuned model and \(8, 8\) float32 in the base",
    ):
        lazyparams.extract_lora(tmp_path / "base", tmp_path / "other", out, 2, progress=False)
    assert not out.exists()
    with pytest.raises(LazyParamsError, match="rank: 0: expected a positive integer"):
        lazyparams.extract_lora(tmp_path / "base", tmp_path / "base", out, 0, progress=False)
    out.mkdir()
    with pytest.raises(LazyParamsError, match="already exists"):
        lazyparams.extract_lora(tmp_path / "base", tmp_path / "base", out, 2, progress=False)
    assert list(out.iterdir()) == []
