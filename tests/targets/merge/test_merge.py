"""Merging through the engine: a configuration as SRC, the merged tensors as numpy computes
them from the published definitions, and every bad configuration refused before any write."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.io import open_source
from lazyparams.io.source_formats import source_files

F32 = np.float32


def merged(config_path: Path, dst: Path, spec: str = "merged") -> dict[str, np.ndarray]:
    lazyparams.convert(spec, config_path, dst, progress=False)
    return load_file(str(dst / "model.safetensors"))


def test_linear_is_the_weighted_average(models, config, tmp_path):
    path = config(
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: 0.7}\n"
        "  - model: b\n    parameters: {weight: 0.2}\ndtype: float32\n"
    )
    out = merged(path, tmp_path / "out")
    a, b = models["a"], models["b"]
    assert list(out) == sorted(a)  # every tensor of the first model
    for name in a:  # each product added with one rounding (mergekit's fused multiply-add)
        fused = (a[name] * F32(0.7)).astype(np.float64) + b[name].astype(np.float64) * F32(0.2)
        want = fused.astype(F32) / F32(F32(0.7) + F32(0.2))
        np.testing.assert_array_equal(out[name], want)


def test_linear_without_normalize_and_a_bfloat16_output(models, config, tmp_path):
    path = config(
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: 0.5}\n"
        "  - model: b\n    parameters: {weight: 0.25}\nparameters: {normalize: false}\n"
        "dtype: float32\nout_dtype: bfloat16\n"
    )
    out = merged(path, tmp_path / "out")
    name = "model.layers.1.mlp.up_proj.weight"
    want = models["a"][name] * F32(0.5) + models["b"][name] * F32(0.25)
    assert out[name].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out[name], want.astype(ml_dtypes.bfloat16))
    config_json = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config_json["torch_dtype"] == "bfloat16"
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_task_arithmetic_moves_the_base_along_the_task_vectors(models, config, tmp_path):
    path = config(
        "merge_method: task_arithmetic\nbase_model: base\nmodels:\n"
        "  - model: a\n    parameters: {weight: 0.6}\n  - model: b\n    parameters: {weight: 0.3}\n"
        "parameters: {lambda: 0.9}\ndtype: float32\n"
    )
    out = merged(path, tmp_path / "out")
    base, a, b = models["base"], models["a"], models["b"]
    for name in base:
        mixed = (a[name] - base[name]) * F32(0.6) + (b[name] - base[name]) * F32(0.3)
        np.testing.assert_array_equal(out[name], base[name] + mixed * F32(0.9))


def test_passthrough_slices_stack_layers_and_update_the_config(models, config, tmp_path):
    path = config(
        "merge_method: passthrough\nslices:\n"
        "  - sources:\n      - model: a\n        layer_range: [0, 2]\n"
        "  - sources:\n      - model: b\n        layer_range: [1, 3]\n"
    )
    out = merged(path, tmp_path / "out")
    a, b = models["a"], models["b"]
    q = "model.layers.{}.self_attn.q_proj.weight"
    for layer, (model, own) in enumerate([(a, 0), (a, 1), (b, 1), (b, 2)]):
        np.testing.assert_array_equal(out[q.format(layer)], model[q.format(own)])
    np.testing.assert_array_equal(out["model.embed_tokens.weight"], a["model.embed_tokens.weight"])
    np.testing.assert_array_equal(out["lm_head.weight"], b["lm_head.weight"])  # the last slice
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["num_hidden_layers"] == 4


def test_a_merge_composes_with_a_recipe_in_one_run(models, config, tmp_path):
    path = config(
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: 1.0}\n"
        "  - model: b\n    parameters: {weight: 1.0}\n"
    )
    report = lazyparams.convert("cast:float16", path, tmp_path / "out.safetensors", progress=False)
    assert report.plan.spec == "linear merge + cast:float16"
    out = load_file(str(tmp_path / "out.safetensors"))
    name = "model.norm.weight"
    want = ((models["a"][name] + models["b"][name]) / F32(2)).astype(np.float16)
    np.testing.assert_array_equal(out[name], want)


def test_the_source_set_names_tensors_by_model_and_fingerprints_every_file(models, config):
    path = config("merge_method: linear\nmodels:\n  - model: a\n  - model: b\n")
    with open_source(path) as source:
        assert "b::model.norm.weight" in source.names()
        rows = source.load_rows("a::model.embed_tokens.weight", 2, 5)
        np.testing.assert_array_equal(rows, models["a"]["model.embed_tokens.weight"][2:5])
        names = [p.name for p in source_files(source)]
    assert names == ["merge.yml", "model.safetensors", "model.safetensors"]


BAD = [
    ("merge_method: linear\nmodels:\n  - model: a\nweights: 1\n", "line 4: unknown key 'weights'"),
    (
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: 1, density: 2}\n",
        "line 4: linear takes no parameter 'density'",
    ),
    ("merge_method: linear\nmodels:\n  - model: a\n  - model: b\n", "needs parameter 'weight'"),
    (
        "merge_method: task_arithmetic\nmodels:\n  - model: a\n    parameters: {weight: 1}\n",
        "task_arithmetic needs base_model",
    ),
    ("merge_method: blend\nmodels:\n  - model: a\n", "unknown merge method 'blend'; expected"),
    ("merge_method: linear\nmodels:\n  - model: nowhere\n", "model 'nowhere': no such folder"),
    (
        "merge_method: linear\nmodels:\n  - model: a\n    parameters: {weight: yes}\n",
        "parameter 'weight' = True: expected a number",
    ),
    ("merge_method: linear\nmodels: [\n", "not a readable YAML document"),
    (
        "merge_method: linear\nmodels:\n  - model: a\ntokenizer:\n  source: union\n",
        "line 4: tokenizer: a merged vocabulary .* is not supported",
    ),
    (
        "merge_method: linear\nslices:\n  - sources:\n      - model: a\n",
        "line 4: expected layer_range: ",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_configuration_is_one_line_before_any_write(models, config, tmp_path, text, message):
    path = config(text)
    with pytest.raises(LazyParamsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        lazyparams.convert("merged", path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


def test_models_of_different_shapes_are_named_with_both_shapes(models, config, tmp_path):
    from tests.targets.merge.conftest import model_tensors, write_model

    wider = model_tensors(9)
    wider["model.embed_tokens.weight"] = np.zeros((20, 8), np.float32)
    write_model(tmp_path / "wide", wider)
    path = config(
        "merge_method: linear\nmodels:\n  - model: a\n  - model: wide\nparameters: {weight: 1}\n"
    )
    with pytest.raises(LazyParamsError, match=r"is \[16, 8\] in 'a' but .* is \[20, 8\] in 'wide'"):
        lazyparams.plan("merged", path)


def test_a_model_named_org_slash_name_is_found_in_the_hugging_face_cache(
    models, config, tmp_path, monkeypatch
):
    cache = tmp_path / "hub"
    snapshot = cache / "models--org--model-a" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (cache / "models--org--model-a" / "refs").mkdir()
    (cache / "models--org--model-a" / "refs" / "main").write_text("abc123\n")
    for file in (tmp_path / "a").iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    path = config(
        "merge_method: linear\nmodels:\n  - model: org/model-a\n    parameters: {weight: 1}\n"
        "  - model: b\n    parameters: {weight: 1}\n"
    )
    out = merged(path, tmp_path / "out")
    name = "model.norm.weight"
    want = (models["a"][name] + models["b"][name]) / F32(2)
    np.testing.assert_array_equal(out[name], want)
