"""A GGUF file as the gguf target's source: its tensors re-typed, its metadata kept.

`gguf:Q4_K_M model-Q8_0.gguf` requantizes as `llama-quantize` does (every tensor's type by
the mixture, from the source's own types; block-typed tensors are dequantized to float32
first), and `gguf:f16` widens or narrows by the converter's rules. The file's KV pairs stay in
their order; `general.file_type` and `general.quantization_version` are set as llama-quantize
sets them. Imports the frontend, io and this package; gguf and the GGUF reader when a GGUF
file is read or its metadata written.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.model_config import ModelFolder
from lazyparams.targets.llamacpp.mixtures import QUANTIZATION_VERSION, load_order, tensor_types
from lazyparams.targets.llamacpp.outtype import OutputType, converter_dtype, output_type

if TYPE_CHECKING:
    from gguf import GGUFValue

FLOATS = ("float32", "float16", "bfloat16")
QUANTIZATION_KEY = "general.quantization_version"
FILE_TYPE_KEY = "general.file_type"
KEPT_F32 = ("ffn_gate_inp.weight", "position_embd.weight", "token_types.weight")
"""Tensors llama.cpp's converter keeps in F32 whatever the output type (routers, positions)."""


def as_quantized(metadata: Mapping[str, GGUFValue], file_type: int) -> dict[str, GGUFValue]:
    """KV pairs as llama-quantize writes them: every pair of its input in order, then
    `general.quantization_version` and `general.file_type` (moved to the end, new values)."""
    from gguf import GGUFValue, GGUFValueType

    meta = {k: v for k, v in metadata.items() if k not in (QUANTIZATION_KEY, FILE_TYPE_KEY)}
    meta[QUANTIZATION_KEY] = GGUFValue(QUANTIZATION_VERSION, GGUFValueType.UINT32)
    meta[FILE_TYPE_KEY] = GGUFValue(file_type, GGUFValueType.UINT32)
    return meta


def in_load_order(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Outputs in the order llama-quantize writes tensors: outside layers first, then by
    layer, each group by name."""
    return {name: outputs[name] for name in sorted(outputs, key=load_order)}


@functools.lru_cache(maxsize=4)
def _file_metadata(path: Path, size: int, mtime_ns: int) -> dict[str, GGUFValue]:
    """A GGUF file's KV pairs, read once per conversion (the transform, the metadata and the
    plan each ask for them); size and time in the key keep a rewritten file from being reused."""
    from lazyparams.io.gguf_metadata import read_gguf_metadata

    return read_gguf_metadata(path)


def gguf_source(folder: ModelFolder) -> Path | None:
    """The GGUF file (or first part) a conversion reads, when it reads one and no config.json."""
    source = folder.source
    if source is None or folder.config is not None:
        return None
    if source.is_file() and source.suffix == ".gguf":
        return source
    parts = sorted(source.glob("*.gguf")) if source.is_dir() else []
    return parts[0] if parts else None


@dataclass(frozen=True, slots=True)
class Retyped:
    """A GGUF file's tensors in another output type, with the file's metadata."""

    path: Path
    metadata_in: dict[str, GGUFValue]
    arch: str
    out: OutputType

    @classmethod
    def read(cls, path: Path, type_name: str, inputs: Mapping[str, Any]) -> Retyped:
        """The file's metadata and architecture, and the output type asked for."""
        stat = path.stat()
        meta = _file_metadata(path, stat.st_size, stat.st_mtime_ns)
        arch_value = meta.get("general.architecture")
        if arch_value is None or not isinstance(arch_value.value, str):
            raise ConvertError(f"{path}: no general.architecture; expected a llama.cpp GGUF file")
        matrices = [info.dtype for info in inputs.values() if len(info.shape) >= 2]
        return cls(path, dict(meta), arch_value.value, output_type(type_name, matrices))

    def count(self, key: str, default: int | None = None) -> int:
        """`{arch}.<key>` of the file as an int."""
        value = self.metadata_in.get(f"{self.arch}.{key}")
        if value is None or not isinstance(value.value, int):
            if default is not None:
                return default
            raise ConvertError(f"{self.path}: expected an integer {self.arch}.{key}, found none")
        return int(value.value)

    def dtypes(self, params: Mapping[str, Tensor]) -> dict[str, str]:
        """Each tensor's output dtype: the converter's rule, or llama-quantize's mixture."""
        if self.out.dtype is not None:
            quantized = self.out.dtype
            return {
                name: converter_dtype(name, t.shape, quantized, name.endswith(KEPT_F32))
                for name, t in params.items()
            }
        listed = [(name, t.shape, t.dtype) for name, t in params.items()]
        heads = self.count("attention.head_count")
        types: dict[str, str] = tensor_types(
            self.out.name,
            listed,
            n_head=heads,
            n_head_kv=self.count("attention.head_count_kv", heads),
            n_expert=self.count("expert_count", 0),
            n_layer=self.count("block_count"),
            arch=self.arch,
        )
        return types

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Any]:
        """Every tensor in its new type; a block-typed one goes through float32."""
        out: dict[str, Any] = {}
        for name, dtype in self.dtypes(params).items():
            tensor = params[name]
            if tensor.dtype != dtype and tensor.dtype not in FLOATS:
                tensor = tensor.astype("float32")
            out[name] = tensor if tensor.dtype == dtype else tensor.astype(dtype)
        return in_load_order(out)

    def metadata(self, outputs: Sequence[Any]) -> dict[str, GGUFValue]:
        """The file's KV pairs, with the new file type and the quantization version."""
        return as_quantized(self.metadata_in, self.out.file_type)

    def rows(self) -> list[tuple[str, str]]:
        """What `plan` says of the source and the type."""
        return [
            ("architecture", f"{self.arch} (from {self.path.name})"),
            ("output type", f"{self.out.name} (general.file_type {self.out.file_type})"),
        ]
