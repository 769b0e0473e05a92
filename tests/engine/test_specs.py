"""SPECs bound to the model folder: transform(params, config), metadata(config), targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

import lazyparams
from lazyparams.engine.specs import model_folder, resolve_spec, spec_with_options
from lazyparams.errors import ConvertError
from lazyparams.io import open_source


def _folder(tmp_path: Path, config: dict[str, Any] | None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    save_file(
        {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(folder / "model.safetensors")
    )
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


SPEC = """
def transform(params, config):
    return {"w": params["w"] * config["scale"]}

def metadata(config):
    return {"general.name": config["name"]}
"""


def test_a_spec_file_reads_the_config(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"scale": 3.0, "name": "tiny"})
    spec = tmp_path / "spec.py"
    spec.write_text(SPEC)
    out: dict[str, Any] = {}
    lazyparams.convert(str(spec), folder, out, progress=False)
    np.testing.assert_array_equal(out["w"], np.arange(6, dtype=np.float32).reshape(2, 3) * 3)
    with open_source(folder) as source:
        resolved = resolve_spec(str(spec), source, folder)
        assert resolved.metadata([]) == {"general.name": "tiny"}


def test_a_callable_of_params_and_config(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"scale": 2.0})
    out: dict[str, Any] = {}
    lazyparams.convert(
        lambda p, c: {"w": p["w"] * c["scale"]}, folder / "model.safetensors", out, progress=False
    )
    assert out["w"][1, 2] == 10.0


def test_a_folder_without_config_gives_an_empty_config(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    out: dict[str, Any] = {}
    lazyparams.convert(lambda p, c: {"n": p["w"] + len(c)}, folder, out, progress=False)
    assert out["n"][0, 0] == 0.0
    with open_source(folder) as source:
        assert model_folder(folder, source).config is None


def test_metadata_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"scale": 1.0})
    spec = tmp_path / "spec.py"
    spec.write_text(
        "def transform(params):\n    return dict(params)\n\ndef metadata(config):\n    return 3\n"
    )
    with open_source(folder) as source, pytest.raises(ConvertError, match="must return a mapping"):
        resolve_spec(str(spec), source, folder).metadata([])


def test_broken_config_names_the_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    (folder / "config.json").write_text("[" * 100000)
    with pytest.raises(
        lazyparams.errors.CheckpointError, match=r"config\.json: not a readable JSON"
    ):
        lazyparams.plan(lambda p, c: dict(p), folder)


def test_gguf_pre_applies_to_the_gguf_recipe_only() -> None:
    assert spec_with_options("cast:float16") == "cast:float16"
    target = spec_with_options("gguf:q8_0", gguf_pre="qwen2")
    assert (target.type_name, target.pre) == ("q8_0", "qwen2")  # type: ignore[attr-defined]
    with pytest.raises(ConvertError, match="--gguf-pre applies to the gguf recipe"):
        spec_with_options("cast:float16", gguf_pre="qwen2")
