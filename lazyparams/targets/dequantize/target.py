"""Dequantization as the first step of any SPEC: the dequantized model's header, folder and
side files.

When a checkpoint's folder has a config.json whose `quantization_config` is of a supported
kind (`io.prequantized`), the engine traces `spec(dequantize(params))`: the SPEC sees each
weight in float32 under its own name, the scales hidden, and a folder whose config.json no
longer claims quantization; a folder destination gets that config.json (its dtype set to the
one written) and the tokenizer files. Imports the io layer, the LoRA and merge targets'
constants and `scaled`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.model_config import ModelFolder, read_config
from lazyparams.io.prequantized import (
    KEY,
    PackedGroups,
    PackedWeights,
    ScaledWeights,
    read_quantization,
)
from lazyparams.io.source_set import SourceSet
from lazyparams.targets.source_steps import ComputedHeader, folder_files

if TYPE_CHECKING:  # the binders import numpy: only a checkpoint that claims a quantization
    from lazyparams.targets.dequantize.gptq import LayerDequantization
    from lazyparams.targets.dequantize.scaled import Dequantization


def dequantize_step(source: Any, seed: int | None = None) -> DequantizeStep | None:
    """The dequantization `source` needs (bound and checked) when its folder's config.json
    claims a quantization, else None (`seed` is not used: nothing is drawn at random)."""
    path = getattr(source, "path", None)
    if path is None or isinstance(source, SourceSet):
        return None
    folder = ModelFolder.at(Path(path))
    if folder.config is None:
        return None
    scheme = read_quantization(folder.config, folder.config_path)
    if scheme is None:
        return None
    names = reading_order(source.names(), Path(path))
    infos = {name: source.info(name) for name in names}
    return DequantizeStep(_bound(scheme, infos, str(path)), folder)


def _bound(
    scheme: ScaledWeights | PackedWeights | PackedGroups,
    infos: Mapping[str, TensorInfo],
    path: str,
) -> Dequantization | LayerDequantization:
    """The checkpoint's tensors bound to `scheme`'s dequantization (its module imported
    here, so a plain checkpoint's plan imports none of them)."""
    if isinstance(scheme, PackedWeights):
        from lazyparams.targets.dequantize.gptq import bind_gptq

        return bind_gptq(scheme, infos, path)
    if isinstance(scheme, PackedGroups):
        from lazyparams.targets.dequantize.packed_groups import bind_packed_groups

        return bind_packed_groups(scheme, infos, path)
    from lazyparams.targets.dequantize.scaled import bind_scaled

    return bind_scaled(scheme, infos, path)


def reading_order(names: Sequence[str], path: Path) -> list[str]:
    """`names` in the order llama.cpp's converter reads a safetensors checkpoint: its shards
    by file name (as the index names them), each shard's tensors by name. A plain checkpoint
    of one dtype is in that order already; float8 weights beside their float32 scales are not
    (a safetensors file lays out wider dtypes first)."""
    shard: dict[str, str] = {}
    if path.name.endswith(".index.json"):
        weight_map = read_config(path).get("weight_map")
        shard = dict(weight_map) if isinstance(weight_map, dict) else {}
    return sorted(names, key=lambda name: (str(shard.get(name, "")), name))


@dataclass(frozen=True, slots=True)
class DequantizeStep:
    """Dequantization as the first step of a SPEC (see `targets.source_steps.SourceStep`)."""

    dequantization: Dequantization | LayerDequantization
    source_folder: ModelFolder

    @property
    def name(self) -> str:
        """How reports name the step."""
        return f"{self.dequantization.scheme.method} dequantization"

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The dequantized tensors."""
        return self.dequantization.transform(params)

    def header(self) -> ComputedHeader:
        """The dequantized model's tensors, without data."""
        path = str(self.source_folder.path)
        return ComputedHeader(self.dequantization.infos, path, "the dequantized model")

    def folder(self) -> ModelFolder:
        """The checkpoint's folder, config.json without its quantization_config."""
        config = self.source_folder.config
        assert config is not None  # a step is made only for a folder whose config claims one
        updated = {key: value for key, value in config.items() if key != KEY}
        return ModelFolder(self.source_folder.path, updated, self.source_folder.source)

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """config.json (no quantization_config, the dtype written) and the tokenizer files."""
        folder = self.folder()
        return folder_files(folder.config, folder.path, outputs)
