"""Sources that bring their own first step: a merge configuration's models, a base model with
LoRA adapters, a pre-quantized checkpoint. The engine traces `SPEC(step(params))` over such a
source.

A `SourceStep` maps the source's tensors to a model's (`transform`), describes that model
without data (`header`: names, shapes, dtypes), gives its folder (config.json, tokenizer) and
the files a Hugging Face folder of it holds beside the weights. `source_step` finds the step a
source carries, through `STEP_KINDS`. Imports the io layer; the targets that define steps are
named as strings and imported when a source of their kind comes.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.model_config import ModelFolder


class StepHeader(Protocol):
    """The stepped model's tensors, without data."""

    def names(self) -> list[str]: ...
    def info(self, name: str) -> TensorInfo: ...


class SourceStep(Protocol):
    """The first step a source brings (see the module docstring)."""

    @property
    def name(self) -> str:
        """How reports name the step ("linear merge", "LoRA merge")."""

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The stepped model's tensors, traced from the source's."""

    def header(self) -> StepHeader:
        """The stepped model's tensors as a header."""

    def folder(self) -> ModelFolder:
        """The stepped model's folder: config.json (updated) and tokenizer files."""

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """The files a folder destination of `outputs` holds beside the weights."""


STEP_KINDS: dict[str, tuple[str, str]] = {
    "merge_config": ("lazyparams.targets.merge.target", "merge_step"),
    "lora_adapters": ("lazyparams.targets.lora.target", "lora_step"),
    "path": ("lazyparams.targets.dequantize.target", "dequantize_step"),
}
"""Each kind of stepped source: the attribute such a source carries, and the module and
function (`step(source, seed) -> SourceStep | None`) that make its step. A module is imported
only for a source of its kind, so a merge or LoRA module only for such a source; a checkpoint
opened from a path may be pre-quantized (its config.json says), so the dequantization's module
looks at every such one and returns None for a plain one. The first kind present decides."""


def source_step(source: Any, seed: int | None = None) -> SourceStep | None:
    """The first step `source` brings, or None for a plain checkpoint; `seed` seeds a merge's
    random masks."""
    for attribute, (module, function) in STEP_KINDS.items():
        if getattr(source, attribute, None) is not None:
            step: SourceStep | None = getattr(importlib.import_module(module), function)(
                source, seed
            )
            return step
    return None
