"""A LoRA merge as the first step of any SPEC: the merged model's header, folder and files.

When the source is a base model with adapters (a `SourceSet` made by
`io.lora_adapter.open_lora_sources`), the engine traces `spec(merge(params))`: the SPEC sees
the base's tensors, adapters merged, under the base's names; a folder destination gets the
base's config.json (its dtype updated when the SPEC changes it) and tokenizer files. Imports
the io layer, the merge target's list of tokenizer files and the LoRA binding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import Array, TensorInfo
from lazyparams.io.model_config import CONFIG_NAME, ModelFolder
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.lora.binding import LoraBinding, bind_lora
from lazyparams.targets.lora.merge import merge_lora
from lazyparams.targets.merge.target import FLOAT_DTYPES, TOKENIZER_FILES

DTYPE_KEYS = ("torch_dtype", "dtype")
"""config.json's dtype key, as transformers 4 and 5 spell it."""


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

    def header(self) -> LoraHeader:
        """The merged model's tensors, without data."""
        infos = {t.name: t.info for t in self.binding.tensors}
        return LoraHeader(infos, str(self.binding.base))

    def folder(self) -> ModelFolder:
        """The base model's folder, config.json as it is."""
        return ModelFolder.at(self.binding.base)

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """config.json and the tokenizer files of the base, beside the merged weights."""
        folder = self.folder()
        files = {
            name: (folder.path / name).read_bytes()
            for name in TOKENIZER_FILES
            if (folder.path / name).is_file()
        }
        if folder.config is not None:
            config = _with_dtype(folder.config, outputs)
            files[CONFIG_NAME] = (json.dumps(config, indent=2) + "\n").encode()
        return files


@dataclass(frozen=True, slots=True)
class LoraHeader:
    """The merged model as a header: what a SPEC after the merge is traced against."""

    infos: Mapping[str, TensorInfo]
    path: str

    def names(self) -> list[str]:
        """The base's tensor names, in its order."""
        return list(self.infos)

    def info(self, name: str) -> TensorInfo:
        """Shape and dtype of a merged tensor (the base's)."""
        found = self.infos.get(name)
        if found is None:
            raise CheckpointError(f"{self.path}: the LoRA merge writes no tensor {name!r}")
        return found

    def load(self, name: str) -> Array:
        """Never called: a merged tensor exists only inside the traced merge."""
        raise CheckpointError(f"{self.path}: merged tensor {name!r} is computed, not loaded")

    def close(self) -> None:
        """Nothing to release."""


def _with_dtype(config: Mapping[str, Any], outputs: Sequence[TensorInfo]) -> dict[str, Any]:
    """`config` with its dtype key set to the float dtype the outputs are written in, when
    they are all in one (a SPEC such as cast:float16 changes it)."""
    updated = dict(config)
    written = {o.dtype for o in outputs if o.dtype in FLOAT_DTYPES}
    if len(written) == 1:
        keys = [key for key in DTYPE_KEYS if key in updated] or [DTYPE_KEYS[0]]
        for key in keys:
            updated[key] = next(iter(written))
    return updated
