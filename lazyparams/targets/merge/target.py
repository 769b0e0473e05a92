"""A merge as the first step of any SPEC: the merged model's header, folder and side files.

When the source is a merge configuration (a `SourceSet` that carries one), the engine traces
`spec(merge(params))`: the SPEC sees the merged tensors under the models' own names, a header
of them (`MergedHeader`: names, shapes, dtypes, no data) and the base model's folder with its
config.json updated (the layer count of a slice merge, the dtype written). Imports the io
layer and the merge binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import Array, TensorInfo
from lazyparams.io.model_config import ModelFolder
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.merge.merge import MergeBinding, bind_merge
from lazyparams.targets.source_steps import folder_files

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
"""The config.json keys that hold a model's layer count."""


def merge_step(source: Any, seed: int | None = None) -> MergeStep | None:
    """The merge `source` describes (bound and checked), or None when it is no merge."""
    config = getattr(source, "merge_config", None)
    if config is None or not isinstance(source, SourceSet):
        return None
    return MergeStep(bind_merge(config, source, 0 if seed is None else seed))


@dataclass(frozen=True, slots=True)
class MergeStep:
    """A merge as the first step of a SPEC (see `targets.source_steps.SourceStep`)."""

    binding: MergeBinding

    @property
    def name(self) -> str:
        """The method's name: "linear merge"."""
        return f"{self.binding.method.name} merge"

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The merged tensors."""
        return self.binding.transform(params)

    def header(self) -> MergedHeader:
        """The merged model's tensors, without data."""
        return MergedHeader(self.binding, str(self.binding.config.path))

    def folder(self) -> ModelFolder:
        """The base model's folder, its config updated."""
        return merged_folder(self.binding)

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """config.json and the tokenizer files of the merged folder."""
        return side_files(self.binding, outputs)


@dataclass(frozen=True, slots=True)
class MergedHeader:
    """The merged model as a header: what a SPEC following the merge is traced against."""

    binding: MergeBinding
    path: str

    def names(self) -> list[str]:
        """The merged tensors' names, in output order."""
        return [out.name for out in self.binding.outputs]

    def info(self, name: str) -> TensorInfo:
        """Shape and dtype of a merged tensor."""
        for out in self.binding.outputs:
            if out.name == name:
                return TensorInfo.of(name, out.shape, out.dtype)
        raise CheckpointError(f"{self.path}: the merge writes no tensor {name!r}")

    def load(self, name: str) -> Array:
        """Never called: a merged tensor exists only inside the traced merge."""
        raise CheckpointError(f"{self.path}: merged tensor {name!r} is computed, not loaded")

    def close(self) -> None:
        """Nothing to release."""


def merged_folder(binding: MergeBinding) -> ModelFolder:
    """The base model's folder (else the first model's), its config updated for the merge."""
    config = binding.config
    alias = config.base or config.models[0].alias
    folder = ModelFolder.at(config.folders[alias])
    if folder.config is None:
        return ModelFolder(folder.path, None, None)
    updated = dict(folder.config)
    layers = binding.layer_count
    for key in LAYER_KEYS:
        if key in updated and layers is not None:
            updated[key] = layers
    return ModelFolder(folder.path, updated, None)


def side_files(binding: MergeBinding, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
    """The files a merged Hugging Face folder holds beside its weights `outputs`: config.json
    (updated: layer count, the dtype written) and the tokenizer's files, from
    `tokenizer_source` (a model, or `base`, the default)."""
    return folder_files(merged_folder(binding).config, _tokenizer_folder(binding), outputs)


def _tokenizer_folder(binding: MergeBinding) -> Any:
    config = binding.config
    choice = config.tokenizer_source
    if choice in (None, "base"):
        return config.folders[config.base or config.models[0].alias]
    for alias, folder in config.folders.items():
        if choice in (alias, str(folder)) or folder.name == choice:
            return folder
    raise CheckpointError(
        f"{config.where('tokenizer_source')}: tokenizer_source {choice!r}: expected base or "
        f"one of the merged models ({', '.join(config.folders)})"
    )
