"""A llama-like checkpoint made on the spot, and the conversion `lazyparams demo` runs on it.

The checkpoint uses Hugging Face llama names (`model.layers.{i}.self_attn.q_proj.weight`, ...)
and is written tensor by tensor as sharded safetensors, through the staged writer `convert`
uses (see `destination.write_tensors`), so making it needs one tensor's memory;
with its config.json and a byte-level tokenizer (`demo_model`) it is a model folder the `gguf`
recipes convert.
Imports `io` and the engine's own modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lazyparams.engine.convert import Report, convert
from lazyparams.engine.demo_model import DEMO_PRE, write_model_files
from lazyparams.engine.destination import write_tensors
from lazyparams.engine.specs import gguf_target, target_of
from lazyparams.io import TensorInfo
from lazyparams.targets.llamacpp.llama import DENSE_MLP, LAYER_RULES

_LAYER_NAMES = tuple(hf for hf, _, _ in (*LAYER_RULES, *DENSE_MLP))
"""A decoder layer's tensors, in llama's order: the names the GGUF llama table maps."""

DEMO_RECIPE = "fuse-qkv+cast:float16"


@dataclass(frozen=True, slots=True)
class LlamaShape:
    """The sizes of a llama-like model: layers, hidden size d, MLP size f, vocabulary."""

    layers: int = 8
    hidden: int = 512
    intermediate: int = 1376
    vocab: int = 4096

    def _layer_shape(self, name: str) -> tuple[int, ...]:
        """Norms are vectors of d; the MLP's gate and up map d to f, down f to d; attention
        projections are d x d."""
        d, f = self.hidden, self.intermediate
        if name.endswith("layernorm.weight"):
            return (d,)
        if name.startswith(("mlp.gate_proj", "mlp.up_proj")):
            return (f, d)
        return (d, f) if name.startswith("mlp.down_proj") else (d, d)

    def infos(self) -> list[TensorInfo]:
        """Every tensor of the checkpoint, float32, embedding first and lm_head last."""
        infos = [TensorInfo.of("model.embed_tokens.weight", (self.vocab, self.hidden), "float32")]
        for layer in range(self.layers):
            for name in _LAYER_NAMES:
                shape = self._layer_shape(name)
                infos.append(TensorInfo.of(f"model.layers.{layer}.{name}", shape, "float32"))
        infos.append(TensorInfo.of("model.norm.weight", (self.hidden,), "float32"))
        infos.append(TensorInfo.of("lm_head.weight", (self.vocab, self.hidden), "float32"))
        return infos


def make_llama_checkpoint(
    path: str | os.PathLike[str],
    shape: LlamaShape | None = None,
    *,
    shard_size: int | None = 32 << 20,
    seed: int = 0,
) -> Path:
    """Write a random llama-like float32 checkpoint at `path` (a folder of safetensors shards
    with an index when `shard_size` splits it) and return `path`."""
    rng = np.random.default_rng(seed)
    infos = (shape or LlamaShape()).infos()
    write_tensors(path, infos, lambda info: _weight(rng, info), shard_size=shard_size)
    return Path(path)


def _weight(rng: np.random.Generator, info: TensorInfo) -> NDArray[np.float32]:
    if len(info.shape) == 1:  # norms start at one
        return np.ones(info.shape, np.float32)
    # uniform draws: several times faster to make than normal ones, and as good for a demo
    weights = rng.random(info.shape, dtype=np.float32)
    weights -= np.float32(0.5)
    weights *= np.float32(0.04)
    return weights


@dataclass(frozen=True, slots=True)
class DemoRun:
    """What the demo made and did: the checkpoint's size and the conversion's report."""

    source_bytes: int
    report: Report


def run_demo(
    folder: str | os.PathLike[str],
    shape: LlamaShape | None = None,
    *,
    spec: str = DEMO_RECIPE,
    progress: bool = True,
    notice: Callable[[str], None] | None = None,
) -> DemoRun:
    """Make a llama-like checkpoint in `folder` and convert it with `spec` into `folder/out`
    (`notice` as for `convert`)."""
    chosen = shape or LlamaShape()
    source = make_llama_checkpoint(Path(folder) / "llama", chosen)
    write_model_files(source, chosen)
    recipe: Any = spec  # a recipe expression, or the gguf target it names
    target = target_of(spec)
    if target is not None:  # the byte-level tokenizer above splits text as GPT-2 does
        recipe = gguf_target(getattr(target, "type_name", None), pre=DEMO_PRE)
    out = Path(folder) / "out"
    report = convert(recipe, source, out, shard_size=32 << 20, progress=progress, notice=notice)
    return DemoRun(sum(info.nbytes for info in chosen.infos()), report)
