"""A LoRA adapter extracted from a fine-tuned model: per weight, the truncated SVD of the
difference from the base, as mergekit's `mergekit-extract-lora` makes it.

For each 2-D weight (embeddings and the output head only with `embed_lora`), the task vector
`finetuned - base` is taken in the tensors' own dtype, decomposed in float32 by numpy's SVD
(`U S Vh`), and cut to `rank` (or fewer where the weight is smaller): `A = sqrt(S) Vh` and
`B = U sqrt(S)`, the singular values split evenly, both in the task vector's dtype, so that
`B @ A` approximates it with scale 1 (`lora_alpha = r`). An input embedding is decomposed
transposed (PEFT's `lora_embedding_A/B`). Modules named in `save_modules` are stored whole.
The SVD is a numpy kernel of one tensor: its workspace (a few times the tensor in float32)
is outside the planned peak. Imports the io layer and the frontend.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from lazyparams.errors import ConvertError
from lazyparams.frontend import ops
from lazyparams.frontend.kernels import numpy_kernel
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.lora_adapter import PREFIX
from lazyparams.io.source_set import SourceSet, qualified

BASE, FINETUNED = "base", "finetuned"
"""The aliases of the two models in the source set."""
INPUT_EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings")
OUTPUT_EMBEDDINGS = ("lm_head", "embed_out")
"""Module names (their last part) of a model's vocabulary tensors, as transformers names
them: inputs are embeddings (decomposed transposed), outputs linear layers."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """What the adapter holds of one module: a LoRA of `rank` (`embedding`: PEFT's embedding
    names, decomposed transposed), or, with rank 0, the fine-tuned tensor whole."""

    name: str
    """The tensor's name in both models."""
    info: TensorInfo
    rank: int = 0
    embedding: bool = False

    @property
    def module(self) -> str:
        return self.name.removesuffix(".weight")


@dataclass(frozen=True, slots=True)
class Extraction:
    """The checked plan of an extraction: every module the adapter holds, in the models'
    order, and its `adapter_config.json`."""

    modules: tuple[Extracted, ...]
    config: Mapping[str, Any]

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The adapter's tensors, by PEFT's names, traced from the source set's `params`."""
        out: dict[str, Tensor] = {}
        kernels: dict[tuple[int, str], Any] = {}
        for module in self.modules:
            out.update(_extracted(module, params, kernels))
        return out


def plan_extraction(
    sources: SourceSet,
    rank: int,
    *,
    embed_lora: bool = False,
    save_modules: Sequence[str] = (),
    base_name: str = "",
) -> Extraction:
    """Check the two models of `sources` (aliases `base` and `finetuned`) against each other
    and choose what the adapter holds (see the module docstring)."""
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ConvertError(f"rank: {rank!r}: expected a positive integer")
    modules = []
    for name in sources.member_names(FINETUNED):
        info = _matched(sources, name)
        found = _choose(info, rank, embed_lora, save_modules)
        if found is not None:
            modules.append(found)
    if not any(m.rank for m in modules):
        raise ConvertError(
            f"{sources.path}: no 2-D weight to decompose; expected linear layers (or "
            "embeddings with embed_lora)"
        )
    return Extraction(tuple(modules), adapter_config(modules, save_modules, base_name))


def _matched(sources: SourceSet, name: str) -> TensorInfo:
    """The fine-tuned tensor `name`, refused when the base lacks it or has another shape."""
    info = sources.member_info(FINETUNED, name)
    if name not in sources.member_names(BASE):
        raise ConvertError(f"{sources.path}: tensor {name!r} is not in the base; expected it")
    base = sources.member_info(BASE, name)
    if base.shape != info.shape or base.dtype != info.dtype:
        raise ConvertError(
            f"{sources.path}: tensor {name!r} is {info.shape} {info.dtype} in the fine-tuned "
            f"model and {base.shape} {base.dtype} in the base; expected the same"
        )
    return info


def _choose(
    info: TensorInfo, rank: int, embed_lora: bool, save_modules: Sequence[str]
) -> Extracted | None:
    """What the adapter holds of tensor `info`: a LoRA, the whole tensor, or nothing."""
    module = info.name.rsplit(".", 1)[0]
    if _saved(module, save_modules):
        return Extracted(info.name, info)
    if len(info.shape) != 2 or not info.name.endswith(".weight") or "float" not in info.dtype:
        return None
    last = module.rsplit(".", 1)[-1]
    vocabulary = last in INPUT_EMBEDDINGS or last in OUTPUT_EMBEDDINGS
    if vocabulary and not embed_lora:
        return None
    return Extracted(info.name, info, min(rank, *info.shape), last in INPUT_EMBEDDINGS)


def _saved(module: str, save_modules: Sequence[str]) -> bool:
    return any(re.match(rf"(^|.*\.){re.escape(m)}($|\..*)", module) for m in save_modules)


def adapter_config(
    modules: Sequence[Extracted], save_modules: Sequence[str], base_name: str
) -> dict[str, Any]:
    """mergekit's adapter_config.json: r the largest rank, lora_alpha = r, and the modules
    of smaller rank in rank_pattern and alpha_pattern (their scale 1 too)."""
    ranks = {m.module: m.rank for m in modules if m.rank}
    top = max(ranks.values())
    smaller = {module: rank for module, rank in ranks.items() if rank != top}
    return {
        "base_model_name_or_path": base_name,
        "peft_type": "LORA",
        "use_rslora": False,
        "target_modules": sorted({module.rsplit(".", 1)[-1] for module in ranks}),
        "modules_to_save": list(save_modules),
        "task_type": "CAUSAL_LM",
        "r": top,
        "lora_alpha": top,
        "rank_pattern": smaller,
        "alpha_pattern": dict(smaller),
        "lora_dropout": 0.0,
        "fan_in_fan_out": False,
        "inference_mode": True,
    }


def _extracted(
    module: Extracted, params: Mapping[str, Tensor], kernels: dict[tuple[int, str], Any]
) -> dict[str, Tensor]:
    """The adapter's tensors of one module (`kernels`: the SVD kernel of each rank and dtype,
    shared by the modules of one trace)."""
    finetuned = params[qualified(FINETUNED, module.name)]
    if not module.rank:
        return {f"{PREFIX}{module.name}": finetuned}
    delta = finetuned - params[qualified(BASE, module.name)]
    if module.embedding:
        delta = ops.transpose(delta)
    key = (module.rank, str(delta.dtype))
    if key not in kernels:
        kernels[key] = partial(low_rank, rank=module.rank)
    rows, cols = delta.shape
    split = numpy_kernel(
        kernels[key], [(module.rank, cols), (rows, module.rank)], [key[1]] * 2, name="lora_svd"
    )
    a, b = split(delta)
    stem = f"{PREFIX}{module.module}"
    if module.embedding:
        return {f"{stem}.lora_embedding_A": a, f"{stem}.lora_embedding_B": b}
    return {f"{stem}.lora_A.weight": a, f"{stem}.lora_B.weight": b}


def low_rank(delta: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(A, B), rank x cols and rows x rank, of `delta` (rows x cols): its SVD in float32 cut
    to `rank`, the square roots of the singular values on both sides, cast to delta's dtype."""
    u, s, vh = np.linalg.svd(delta.astype(np.float32), full_matrices=False)
    root = np.sqrt(s[:rank])
    a = root[:, None] * vh[:rank]
    b = u[:, :rank] * root[None, :]
    return a.astype(delta.dtype), b.astype(delta.dtype)
