"""Sources that bring their own first step: a merge configuration's models, a base model with
LoRA adapters, a pre-quantized checkpoint. The engine traces `SPEC(step(params))` over such a
source.

A `SourceStep` maps the source's tensors to a model's (`transform`), describes that model
without data (`header`: names, shapes, dtypes), gives its folder (config.json, tokenizer) and
the files a Hugging Face folder of it holds beside the weights. `source_step` finds the step a
source carries, through `STEP_KINDS`. What the steps share is here too: the files a folder
of a stepped model holds beside its weights (`folder_files`) and the header of a model that
exists only inside the traced step (`ComputedHeader`). Imports the io layer; the targets that
define steps are named as strings and imported when a source of their kind comes.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lazyparams.errors import CheckpointError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import Array, TensorInfo
from lazyparams.io.model_config import CONFIG_NAME, ModelFolder


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


FLOAT_DTYPES = ("float32", "float16", "bfloat16")
"""The float dtypes config.json's dtype key may name."""
DTYPE_KEYS = ("torch_dtype", "dtype")
"""config.json's dtype key, as transformers 4 and 5 spell it."""
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "generation_config.json",
)
"""The files beside the weights a stepped folder takes from its source's folder."""


def with_written_dtype(config: Mapping[str, Any], outputs: Sequence[TensorInfo]) -> dict[str, Any]:
    """`config` with its dtype key (each one present, else `torch_dtype`) set to the float
    dtype the outputs are written in, when they are all in one (cast:float16 changes it)."""
    updated = dict(config)
    written = {o.dtype for o in outputs if o.dtype in FLOAT_DTYPES}
    if len(written) == 1:
        for key in [key for key in DTYPE_KEYS if key in updated] or [DTYPE_KEYS[0]]:
            updated[key] = next(iter(written))
    return updated


def folder_files(
    config: Mapping[str, Any] | None, tokenizer: Path, outputs: Sequence[TensorInfo]
) -> dict[str, bytes]:
    """The files a Hugging Face folder of `outputs` holds beside the weights: `config` as
    config.json (the dtype written set) and the tokenizer files found in `tokenizer`."""
    files = {
        name: (tokenizer / name).read_bytes()
        for name in TOKENIZER_FILES
        if (tokenizer / name).is_file()
    }
    if config is not None:
        written = with_written_dtype(config, outputs)
        files[CONFIG_NAME] = (json.dumps(written, indent=2) + "\n").encode()
    return files


@dataclass(frozen=True, slots=True)
class ComputedHeader:
    """A stepped model as a header: what a SPEC after the step is traced against. `what`
    names the step in errors ("the LoRA merge", "the dequantized model")."""

    infos: Mapping[str, TensorInfo]
    path: str
    what: str

    def names(self) -> list[str]:
        """The stepped model's tensor names, in its order."""
        return list(self.infos)

    def info(self, name: str) -> TensorInfo:
        """Shape and dtype of a tensor the step makes."""
        found = self.infos.get(name)
        if found is None:
            raise CheckpointError(f"{self.path}: {self.what} has no tensor {name!r}")
        return found

    def load(self, name: str) -> Array:
        """Never called: a stepped tensor exists only inside the traced step."""
        raise CheckpointError(
            f"{self.path}: tensor {name!r} of {self.what} is computed, not loaded"
        )

    def close(self) -> None:
        """Nothing to release."""


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
