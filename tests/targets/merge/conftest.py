"""Tiny models of one shape for the merge tests, and a writer of merge configurations."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

LAYERS = 3
SHAPES = {
    "model.embed_tokens.weight": (16, 8),
    "model.layers.{i}.self_attn.q_proj.weight": (8, 8),
    "model.layers.{i}.mlp.up_proj.weight": (12, 8),
    "model.layers.{i}.input_layernorm.weight": (8,),
    "model.norm.weight": (8,),
    "lm_head.weight": (16, 8),
}


def model_tensors(seed: int, dtype: str = "float32") -> dict[str, np.ndarray]:
    """A llama-shaped state dict of random values (names in checkpoint order)."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for pattern, shape in SHAPES.items():
        layers = range(LAYERS) if "{i}" in pattern else [None]
        for i in layers:
            name = pattern.format(i=i)
            tensors[name] = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bfloat16":
        import ml_dtypes

        tensors = {k: v.astype(ml_dtypes.bfloat16) for k, v in tensors.items()}
    return tensors


def write_model(folder: Path, tensors: dict[str, np.ndarray]) -> Path:
    """A Hugging Face-like folder: model.safetensors, config.json, tokenizer.json."""
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": LAYERS}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0}}}))
    return folder


@pytest.fixture
def models(tmp_path: Path) -> dict[str, dict[str, np.ndarray]]:
    """Three models of one shape in tmp_path/{base,a,b}; their tensors by folder name."""
    made = {name: model_tensors(seed) for seed, name in enumerate(("base", "a", "b"), start=1)}
    for name, tensors in made.items():
        write_model(tmp_path / name, tensors)
    return made


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a merge configuration's text to tmp_path/merge.yml and return its path."""

    def write(text: str) -> Path:
        path = tmp_path / "merge.yml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def models16(tmp_path: Path) -> dict[str, dict[str, np.ndarray]]:
    """The `models` fixture's three models, stored in bfloat16 (their tensors by folder name)."""
    made = {
        name: model_tensors(seed, "bfloat16")
        for seed, name in enumerate(("base", "a", "b"), start=1)
    }
    for name, tensors in made.items():
        write_model(tmp_path / name, tensors)
    return made


@pytest.fixture
def model_c(tmp_path: Path) -> dict[str, np.ndarray]:
    """A fourth float32 model, in tmp_path/c."""
    tensors = model_tensors(4)
    write_model(tmp_path / "c", tensors)
    return tensors
