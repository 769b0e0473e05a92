"""The recipe registry: one entry per recipe, read by expressions, targets and the CLI's help;
and `drop`, the recipe the contributor's guide adds as its worked example."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from lazyparams.cli import main
from lazyparams.engine import convert
from lazyparams.engine.recipe_registry import (
    RECIPES,
    RecipeEntry,
    Weights,
    recipe,
    recipe_target,
    recipes,
    register_recipe,
)
from lazyparams.engine.recipes import RECIPE_NAMES, drop
from lazyparams.errors import ConvertError
from lazyparams.frontend import trace
from lazyparams.io import DictSource

TENSORS = {
    "model.layers.0.self_attn.q_proj.weight": np.ones((4, 4), np.float32),
    "model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(2, np.float32),
    "model.layers.1.self_attn.rotary_emb.inv_freq": np.ones(2, np.float32),
    "lm_head.weight": np.ones((8, 4), np.float32),
}


class CountingSource(DictSource):
    """A DictSource that records the names it loads."""

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        super().__init__(tensors)
        self.loaded: list[str] = []

    def load(self, name: str) -> Any:
        self.loaded.append(name)
        return super().load(name)


def run(spec: str, tensors: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    out: dict[str, np.ndarray] = {}
    source = CountingSource(tensors)
    convert(spec, source, out, progress=False)
    return out, source.loaded


@pytest.fixture(name="halve")
def halve_fixture() -> Iterator[RecipeEntry]:
    """A recipe registered for one test, the registry restored after it."""
    saved = dict(recipes())

    def step(weights: Weights, factor: float) -> Weights:
        return Weights({n: v * factor for n, v in weights.tensors.items()}, weights.in_out)

    yield register_recipe(RecipeEntry("scale", "multiply by F", step, float, 0.5, "scale[:F]"))
    RECIPES.clear()
    RECIPES.update(saved)


def test_every_built_in_recipe_is_one_entry_with_a_summary() -> None:
    assert RECIPE_NAMES == ("fuse-qkv", "quantize-int8", "quantize-int4", "cast", "drop", "gguf")
    assert all(entry.summary for entry in recipes().values())
    assert recipes()["gguf"].output_format == "gguf"
    assert recipes()["cast"].output_format is None


def test_a_registered_recipe_composes_and_shows_in_help(
    halve: RecipeEntry, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run("scale+cast:float16", {"w": np.full(3, 4.0, np.float32)})
    assert out["w"].tolist() == [2.0, 2.0, 2.0] and out["w"].dtype == np.float16
    assert run("scale:0.25", {"w": np.full(3, 4.0, np.float32)})[0]["w"].tolist() == [1.0] * 3
    for command in ("plan", "convert"):
        assert main([command, "--help"]) == 0
        shown = capsys.readouterr().out
        assert "scale[:F]" in shown and "multiply by F" in shown
        assert "fuse-qkv" in shown and "leave out the tensors whose names match" in shown


def test_a_recipe_registered_twice_or_without_a_step_is_refused(halve: RecipeEntry) -> None:
    with pytest.raises(ConvertError, match="'scale' is registered twice"):
        register_recipe(halve)
    with pytest.raises(ConvertError, match="expected a step or a target"):
        register_recipe(RecipeEntry("nothing", "does nothing"))


def test_a_target_recipe_stands_alone() -> None:
    assert getattr(recipe_target("gguf:q8_0"), "type_name", None) == "q8_0"
    assert recipe_target("fuse-qkv+cast") is None
    with pytest.raises(ConvertError, match="composes with nothing; got 'drop:x\\+gguf'"):
        recipe_target("drop:x+gguf")
    with pytest.raises(ConvertError, match="'gguf' is a target and composes with nothing"):
        recipe("gguf")


# drop ----------------------------------------------------------------------------------------


def test_drop_leaves_out_matching_tensors_without_reading_them() -> None:
    out, loaded = run("drop:*.rotary_emb.inv_freq,lm_head.weight", TENSORS)
    assert list(out) == ["model.layers.0.self_attn.q_proj.weight"]
    assert loaded == ["model.layers.0.self_attn.q_proj.weight"]


def test_drop_composes_and_keeps_the_layout_of_what_stays() -> None:
    out, _ = run("fuse-qkv+drop:*inv_freq+quantize-int8", TENSORS)
    assert sorted(out) == [
        "lm_head.weight",
        "lm_head.weight_scale",
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.q_proj.weight_scale",
    ]
    assert out["lm_head.weight"].shape == (4, 8)  # transposed by fuse-qkv: scales per column
    assert out["lm_head.weight_scale"].shape == (8,)


DROP_REFUSALS = {
    "drop": "recipe 'drop' needs an argument: drop:GLOB[,GLOB...], got 'drop'",
    "drop:a,,b": "bad argument 'a,,b' in 'drop:a,,b': expected globs of tensor names",
    "drop:*.inv_freqs": "pattern '*.inv_freqs' matches no tensor; expected a glob",
    "drop:*": "'*' matches every tensor",
}


def test_bad_drops_are_refused_naming_the_glob() -> None:
    for expression, message in DROP_REFUSALS.items():
        with pytest.raises(ConvertError, match=re.escape(message)):
            run(expression, TENSORS)


def test_drop_traces_on_its_own() -> None:
    mod = trace(lambda p: drop(p, ("b*",)), {"a": ((2,), "float32"), "bc": ((2,), "float32")})
    assert "transform_params" in mod.names()
