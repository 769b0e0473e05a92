"""A LoRA merge as the first step of any SPEC: the merged model's header, folder and files.

When the source is a base model with adapters (a `SourceSet` made by
`io.lora_adapter.open_lora_sources`), the engine traces `spec(merge(params))`: the SPEC sees
the base's tensors, adapters merged, under the base's names; a folder destination gets the
base's config.json (its dtype updated when the SPEC changes it) and tokenizer files. Imports
the io layer, the merge target's list of tokenizer files and the LoRA binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.model_config import ModelFolder
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.lora.binding import LoraBinding, bind_lora
from lazyparams.targets.lora.merge import merge_lora
from lazyparams.targets.source_steps import ComputedHeader, folder_files


def lora_step(source: Any, seed: int | None = None) -> LoraStep | None:
    """The LoRA merge `source` describes (bound and checked), or None when it is none (a
    LoRA merge draws nothing at random: `seed` is not used)."""
    if getattr(source, "lora_adapters", None) is None or not isinstance(source, SourceSet):
        return None
    return LoraStep(bind_lora(source))


@dataclass(frozen=True, slots=True)
class LoraStep:
    """A LoRA merge as the first step of a SPEC (see `targets.source_steps.SourceStep`)."""

    binding: LoraBinding

    @property
    def name(self) -> str:
        """How reports name the step."""
        return "LoRA merge"

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The merged tensors."""
        return merge_lora(self.binding, params)

    def header(self) -> ComputedHeader:
        """The merged model's tensors, without data."""
        infos = {t.name: t.info for t in self.binding.tensors}
        return ComputedHeader(infos, str(self.binding.base), "the LoRA merge")

    def folder(self) -> ModelFolder:
        """The base model's folder, config.json as it is."""
        return ModelFolder.at(self.binding.base)

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """config.json and the tokenizer files of the base, beside the merged weights."""
        folder = self.folder()
        return folder_files(folder.config, folder.path, outputs)
