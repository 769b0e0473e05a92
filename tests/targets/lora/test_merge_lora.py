"""merge_lora: each feature of PEFT's LoRA merge against numpy references written from PEFT's
definitions, on tiny adapters named as PEFT names their tensors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import lazyparams
from lazyparams.errors import BudgetError
from lazyparams.io.lora_adapter import open_lora_sources
from lazyparams.io.source_formats import source_files
from tests.targets.lora.peft_reference import (
    BF16,
    F32,
    base_tensors,
    lora_factors,
    peft_add,
    peft_delta,
    peft_dora,
    write_base,
)

Q0 = "model.layers.0.self_attn.q_proj"
V1 = "model.layers.1.self_attn.v_proj"
UP0 = "model.layers.0.mlp.up_proj"


def merged(base: Path, adapters: list[Path], dst: Path, **options: object) -> dict[str, np.ndarray]:
    lazyparams.merge_lora(base, adapters, dst, progress=False, **options)  # type: ignore[arg-type]
    return load_file(str(dst / "model.safetensors"))


def factors_for(
    weights: dict[str, np.ndarray],
    modules: list[str],
    rank: int,
    seed: int,
    transposed: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """PEFT-named A and B of `rank` for each module, and the factors by module."""
    rng = np.random.default_rng(seed)
    tensors, factors = {}, {}
    for module in modules:
        a, b = lora_factors(rng, weights[f"{module}.weight"], rank, transposed)
        tensors[f"{module}.lora_A.weight"], tensors[f"{module}.lora_B.weight"] = a, b
        factors[module] = (a, b)
    return tensors, factors


def test_plain_lora_adds_the_scaled_product_and_keeps_the_rest(base, adapter, tmp_path):
    folder, weights = base
    tensors, factors = factors_for(weights, [Q0, V1], 4, seed=2)
    out = merged(folder, [adapter("a", tensors, r=4, lora_alpha=16)], tmp_path / "out")
    assert sorted(out) == sorted(weights)
    for name, weight in weights.items():
        module = name.removesuffix(".weight")
        if module in factors:
            want = peft_add(weight, peft_delta(*factors[module], 16 / 4, False))
            np.testing.assert_array_equal(out[name], want)
        else:
            np.testing.assert_array_equal(out[name], weight)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["num_hidden_layers"] == 2
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == (
        folder / "tokenizer.json"
    ).read_bytes()


def test_rslora_rank_and_alpha_patterns_scale_per_module(base, adapter, tmp_path):
    folder, weights = base
    rng = np.random.default_rng(3)
    tensors, scalings = {}, {}
    ranks = {Q0: 4, V1: 2, UP0: 4}
    alphas = {Q0: 16, V1: 16, UP0: 3}
    for module, rank in ranks.items():
        a, b = lora_factors(rng, weights[f"{module}.weight"], rank)
        tensors[f"{module}.lora_A.weight"], tensors[f"{module}.lora_B.weight"] = a, b
        scalings[module] = (a, b, alphas[module] / math.sqrt(rank))
    path = adapter(
        "a",
        tensors,
        r=4,
        lora_alpha=16,
        use_rslora=True,
        target_modules=["q_proj", "v_proj", "up_proj"],
        rank_pattern={"v_proj": 2},
        alpha_pattern={"layers.0.mlp.up_proj": 3},
    )
    out = merged(folder, [path], tmp_path / "out")
    for module, (a, b, scaling) in scalings.items():
        want = peft_add(weights[f"{module}.weight"], peft_delta(a, b, scaling, False))
        np.testing.assert_array_equal(out[f"{module}.weight"], want)


def test_fan_in_fan_out_transposes_the_product(base, adapter, tmp_path):
    folder, weights = base
    tensors, factors = factors_for(weights, [V1, UP0], 3, seed=4, transposed=True)
    path = adapter(
        "a", tensors, r=3, lora_alpha=6, fan_in_fan_out=True, target_modules=["v_proj", "up_proj"]
    )
    out = merged(folder, [path], tmp_path / "out")
    for module, (a, b) in factors.items():
        want = peft_add(weights[f"{module}.weight"], peft_delta(a, b, 2.0, True))
        np.testing.assert_array_equal(out[f"{module}.weight"], want)


def test_modules_to_save_replace_the_base_tensors(base, adapter, tmp_path):
    folder, weights = base
    tensors, _ = factors_for(weights, [Q0], 4, seed=5)
    head = np.random.default_rng(6).standard_normal((16, 8)).astype(BF16)
    norm = np.full(8, 1.5, BF16)
    tensors.update({"lm_head.weight": head, "model.norm.weight": norm})
    path = adapter("a", tensors, target_modules=["q_proj"], modules_to_save=["lm_head", "norm"])
    out = merged(folder, [path], tmp_path / "out")
    np.testing.assert_array_equal(out["lm_head.weight"], head.astype(F32))  # in the base's dtype
    np.testing.assert_array_equal(out["model.norm.weight"], norm.astype(F32))
    np.testing.assert_array_equal(
        out["model.layers.0.input_layernorm.weight"],
        weights["model.layers.0.input_layernorm.weight"],
    )


def test_embedding_and_lm_head_adapters_in_bfloat16(tmp_path, adapter):
    weights = base_tensors(dtype=BF16)
    folder = write_base(tmp_path / "base", weights)
    rng = np.random.default_rng(7)
    embed, head = weights["model.embed_tokens.weight"], weights["lm_head.weight"]
    ea, eb = lora_factors(rng, embed, 4, transposed=True)  # (r, vocab), (hidden, r)
    ha, hb = lora_factors(rng, head, 4)
    tensors = {
        "model.embed_tokens.lora_embedding_A": ea,
        "model.embed_tokens.lora_embedding_B": eb,
        "model.embed_tokens.base_layer.weight": embed,  # save_embedding_layers' copy
        "lm_head.lora_A.weight": ha,
        "lm_head.lora_B.weight": hb,
        "lm_head.base_layer.weight": head,
    }
    path = adapter("a", tensors, target_modules=["embed_tokens", "lm_head"])
    out = merged(folder, [path], tmp_path / "out")
    # an embedding's update is cast to the weight's dtype before the add: two roundings
    want_embed = peft_add(embed, peft_delta(ea, eb, 4.0, True, embedding=True).astype(BF16))
    np.testing.assert_array_equal(out["model.embed_tokens.weight"], want_embed)
    np.testing.assert_array_equal(
        out["lm_head.weight"], peft_add(head, peft_delta(ha, hb, 4.0, False))
    )


def test_bfloat16_factors_are_widened_for_the_product_then_rounded(base, adapter, tmp_path):
    folder, weights = base
    tensors, factors = factors_for(weights, [Q0, UP0], 4, seed=8)
    tensors = {k: v.astype(BF16) for k, v in tensors.items()}
    out = merged(
        folder, [adapter("a", tensors, target_modules=["q_proj", "up_proj"])], tmp_path / "out"
    )
    for module, (a, b) in factors.items():
        delta = peft_delta(a.astype(BF16), b.astype(BF16), 4.0, False)
        assert delta.dtype == BF16
        np.testing.assert_array_equal(
            out[f"{module}.weight"], peft_add(weights[f"{module}.weight"], delta)
        )


def dora_adapter(
    weights: dict[str, np.ndarray],
    modules: list[str],
    seed: int,
    transposed: bool = False,
    embedding: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    tensors, parts = {}, {}
    for module in modules:
        weight = weights[f"{module}.weight"]
        a, b = lora_factors(rng, weight, 2, transposed)
        outputs = weight.shape[1] if transposed else weight.shape[0]
        magnitude = (1 + rng.random(outputs)).astype(F32)
        names = (
            ("lora_embedding_A", "lora_embedding_B")
            if embedding
            else ("lora_A.weight", "lora_B.weight")
        )
        tensors[f"{module}.{names[0]}"], tensors[f"{module}.{names[1]}"] = a, b
        tensors[f"{module}.lora_magnitude_vector"] = magnitude
        parts[module] = (a, b, magnitude)
    return tensors, parts


def test_dora_scales_by_the_magnitude_over_the_row_norms(tmp_path, adapter):
    weights = base_tensors(dtype=BF16)
    folder = write_base(tmp_path / "base", weights)
    tensors, parts = dora_adapter(weights, [Q0, V1, "model.layers.1.mlp.down_proj"], seed=9)
    path = adapter(
        "a",
        tensors,
        r=2,
        lora_alpha=4,
        use_dora=True,
        target_modules=["q_proj", "v_proj", "down_proj"],
    )
    out = merged(folder, [path], tmp_path / "out")
    for module, (a, b, magnitude) in parts.items():
        weight = weights[f"{module}.weight"]
        want = peft_dora(weight, weight, peft_delta(a, b, 2.0, False), magnitude, axis=1)
        np.testing.assert_array_equal(out[f"{module}.weight"], want)


def test_dora_with_fan_in_fan_out_and_on_an_embedding_norms_the_columns(base, adapter, tmp_path):
    folder, weights = base
    fifo, fifo_parts = dora_adapter(weights, [V1], seed=10, transposed=True)
    path = adapter(
        "fifo",
        fifo,
        r=2,
        lora_alpha=4,
        use_dora=True,
        fan_in_fan_out=True,
        target_modules=["v_proj"],
    )
    embed, embed_parts = dora_adapter(
        weights, ["model.embed_tokens"], seed=11, transposed=True, embedding=True
    )
    path2 = adapter(
        "embed", embed, r=2, lora_alpha=4, use_dora=True, target_modules=["embed_tokens"]
    )
    out = merged(folder, [path, path2], tmp_path / "out")
    for parts, embedding in ((fifo_parts, False), (embed_parts, True)):
        for module, (a, b, magnitude) in parts.items():
            weight = weights[f"{module}.weight"]
            delta = peft_delta(a, b, 2.0, True, embedding)
            np.testing.assert_array_equal(
                out[f"{module}.weight"], peft_dora(weight, weight, delta, magnitude, axis=0)
            )


def test_two_adapters_apply_in_order_with_their_weights(base, adapter, tmp_path):
    folder, weights = base
    first, f1 = factors_for(weights, [Q0, V1], 4, seed=12)
    second, f2 = factors_for(weights, [Q0, UP0], 2, seed=13)
    dora, d2 = dora_adapter(weights, [V1], seed=14)
    paths = [
        adapter("a", first, r=4, lora_alpha=16),
        adapter("b", second, r=2, lora_alpha=4, target_modules=["q_proj", "up_proj"]),
        adapter("c", dora, r=2, lora_alpha=4, use_dora=True, target_modules=["v_proj"]),
    ]
    out = merged(folder, paths, tmp_path / "out", weights=[0.5, -2.0, 0.25])
    q = peft_add(weights[f"{Q0}.weight"], peft_delta(*f1[Q0], 0.5 * 16 / 4, False))
    q = peft_add(q, peft_delta(*f2[Q0], -2.0 * 4 / 2, False))
    np.testing.assert_array_equal(out[f"{Q0}.weight"], q)
    np.testing.assert_array_equal(
        out[f"{UP0}.weight"], peft_add(weights[f"{UP0}.weight"], peft_delta(*f2[UP0], -4.0, False))
    )
    # DoRA's norms are of the unmerged weight; the update lands on the merged one
    w0 = weights[f"{V1}.weight"]
    v = peft_add(w0, peft_delta(*f1[V1], 2.0, False))
    a, b, magnitude = d2[V1]
    np.testing.assert_array_equal(
        out[f"{V1}.weight"], peft_dora(w0, v, peft_delta(a, b, 0.25 * 4 / 2, False), magnitude, 1)
    )


def test_an_adapter_model_bin_reads_as_the_safetensors(base, adapter, tmp_path):
    folder, weights = base
    tensors, _ = factors_for(weights, [Q0], 4, seed=15)
    path = adapter("a", tensors)
    want = merged(folder, [path], tmp_path / "from_safetensors")
    file = path / "adapter_model.safetensors"
    lazyparams.convert(lambda p: dict(p), file, path / "adapter_model.bin", progress=False)
    file.unlink()
    got = merged(folder, [path], tmp_path / "from_bin")
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_a_recipe_follows_the_merge_in_the_same_run(base, adapter, tmp_path):
    folder, weights = base
    tensors, _ = factors_for(weights, [Q0], 4, seed=16)
    path = adapter("a", tensors)
    plain = merged(folder, [path], tmp_path / "plain")
    cast = merged(folder, [path], tmp_path / "cast", spec="cast:float16")
    for name in plain:
        np.testing.assert_array_equal(cast[name], plain[name].astype(np.float16))
    assert json.loads((tmp_path / "cast" / "config.json").read_text())["torch_dtype"] == "float16"


def test_gguf_in_one_pass_equals_merging_then_converting(tmp_path, adapter):
    from lazyparams.engine.demo import LlamaShape, make_llama_checkpoint
    from lazyparams.engine.demo_model import DEMO_PRE, write_model_files
    from lazyparams.engine.specs import spec_with_options

    shape = LlamaShape(layers=1, hidden=64, intermediate=96, vocab=272)
    folder = make_llama_checkpoint(tmp_path / "base", shape, shard_size=None)
    write_model_files(folder, shape)
    weights = load_file(str(folder / "model.safetensors"))
    tensors, _ = factors_for(weights, ["model.layers.0.self_attn.q_proj"], 4, seed=17)
    path = adapter("a", tensors, target_modules=["q_proj"])
    gguf = spec_with_options("gguf:Q8_0", gguf_pre=DEMO_PRE)
    lazyparams.merge_lora(folder, path, tmp_path / "once.gguf", spec=gguf, progress=False)
    merged_folder = tmp_path / "merged" / "base"  # general.name comes from the folder's name
    lazyparams.merge_lora(folder, path, merged_folder, progress=False)
    lazyparams.convert(gguf, merged_folder, tmp_path / "twice.gguf", progress=False)
    assert (tmp_path / "once.gguf").read_bytes() == (tmp_path / "twice.gguf").read_bytes()


def test_the_budget_is_checked_before_anything_is_written(base, adapter, tmp_path):
    folder, weights = base
    dora, _ = dora_adapter(weights, [V1], seed=18)
    path = adapter("a", dora, r=2, lora_alpha=4, use_dora=True, target_modules=["v_proj"])
    report = lazyparams.merge_lora(folder, path, tmp_path / "out", progress=False, budget="none")
    assert report.measured_peak_bytes == report.plan.predicted_peak_bytes
    with pytest.raises(BudgetError, match="memory budget of 64 bytes"):
        lazyparams.merge_lora(folder, path, tmp_path / "small", progress=False, budget=64)
    assert not (tmp_path / "small").exists()


def test_resume_checks_the_base_and_every_adapter_file(base, adapter, tmp_path):
    folder, weights = base
    tensors, _ = factors_for(weights, [Q0], 4, seed=19)
    path = adapter("a", tensors)
    with open_lora_sources(folder, [path]) as sources:
        files = set(source_files(sources))
    wanted = {
        folder / "model.safetensors",
        path / "adapter_model.safetensors",
        path / "adapter_config.json",
    }
    assert wanted <= {f.absolute() for f in files}
