"""What a checkpoint holds, without reading its tensors: its metadata (a GGUF file's key/value
pairs with their types, a safetensors file's `__metadata__`), every tensor's shape, type and
size, and the totals per type. A GGUF file lists every tensor, those of GGML types lazyparams
cannot read included. Imports the io layer and the byte format of `analysis`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lazyparams.analysis.memory import format_bytes
from lazyparams.io import open_source
from lazyparams.io.gguf_metadata import read_gguf_metadata
from lazyparams.io.gguf_reader import read_gguf_header

SHOWN_ITEMS = 8
"""Items of a long array shown before it is summarised."""


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One tensor: name, shape (numpy order), type name and bytes."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One metadata pair: key, type name (GGUF's, or "string") and the value, summarised."""

    key: str
    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class Inspection:
    """A checkpoint's metadata and tensors (see the module docstring)."""

    path: str
    format: str
    metadata: list[MetadataEntry] = field(default_factory=list)
    tensors: list[TensorEntry] = field(default_factory=list)

    def totals(self) -> dict[str, tuple[int, int]]:
        """Type name -> (tensors, bytes), the largest total first."""
        found: dict[str, tuple[int, int]] = {}
        for tensor in self.tensors:
            count, size = found.get(tensor.dtype, (0, 0))
            found[tensor.dtype] = (count + 1, size + tensor.nbytes)
        return dict(sorted(found.items(), key=lambda item: -item[1][1]))

    def as_json(self) -> dict[str, Any]:
        """The inspection as plain data, for `--json`."""
        totals = self.totals()
        return {
            "path": self.path,
            "format": self.format,
            "metadata": [{"key": m.key, "type": m.kind, "value": m.value} for m in self.metadata],
            "tensors": [
                {"name": t.name, "shape": list(t.shape), "type": t.dtype, "bytes": t.nbytes}
                for t in self.tensors
            ],
            "totals": {k: {"tensors": n, "bytes": b} for k, (n, b) in totals.items()},
            "tensor_count": len(self.tensors),
            "total_bytes": sum(t.nbytes for t in self.tensors),
        }


def inspect_checkpoint(
    path: str | os.PathLike[str], *, allow_outside_links: bool = False
) -> Inspection:
    """What the checkpoint at `path` (a file or a folder, any format lazyparams reads)
    holds; no tensor data is read."""
    text = str(path)
    if Path(text).is_file() and _is_gguf(Path(text)):
        return _inspect_gguf(text)
    with open_source(text, allow_outside_links) as source:
        tensors = [_entry(source.info(name)) for name in source.names()]
        raw = getattr(source, "metadata", None)
        metadata = [
            MetadataEntry(str(key), "string", value)
            for key, value in (raw.items() if isinstance(raw, dict) else ())
        ]
        return Inspection(text, type(source).__name__.removesuffix("Source"), metadata, tensors)


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as file:
        return file.read(4) == b"GGUF"


def _inspect_gguf(path: str) -> Inspection:
    """A GGUF file's pairs (split keys included) and every tensor of its header."""
    header = read_gguf_header(path)
    metadata = [
        MetadataEntry(key, _gguf_kind(value), summarised(value.value))
        for key, value in read_gguf_metadata(path, include_split=True).items()
    ]
    tensors = [
        TensorEntry(t.name, tuple(t.shape), t.ggml_type.name, int(t.nbytes)) for t in header.tensors
    ]
    return Inspection(path, "GGUF", metadata, tensors)


def _gguf_kind(value: Any) -> str:
    """GGUF's type name of a value: UINT32, STRING, ARRAY[FLOAT32], ..."""
    kind = value.type.name
    sub = getattr(value, "sub_type", None)
    return f"{kind}[{sub.name}]" if kind == "ARRAY" and sub is not None else kind


def summarised(value: Any) -> Any:
    """A value as plain data; an array of more than SHOWN_ITEMS items as its first items and
    its length (`{"items": N, "first": [...]}`), bytes as text where they decode."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list | tuple):
        items = [summarised(v) for v in value[:SHOWN_ITEMS]]
        return items if len(value) <= SHOWN_ITEMS else {"items": len(value), "first": items}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _entry(info: Any) -> TensorEntry:
    return TensorEntry(info.name, tuple(info.shape), info.dtype, int(info.nbytes))


def describe_lines(inspection: Inspection) -> Iterator[str]:
    """The inspection as text lines: metadata, tensors, totals."""
    yield f"{inspection.path}: {inspection.format}, {len(inspection.tensors)} tensors"
    if inspection.metadata:
        yield ""
        yield f"metadata ({len(inspection.metadata)} keys)"
        width = max(len(m.key) for m in inspection.metadata)
        for entry in inspection.metadata:
            yield f"  {entry.key:<{width}}  {entry.kind:<14}  {_shown(entry.value)}"
    yield ""
    yield "tensors"
    width = max((len(t.name) for t in inspection.tensors), default=4)
    for tensor in inspection.tensors:
        shape = "x".join(map(str, tensor.shape)) or "scalar"
        size = format_bytes(tensor.nbytes)
        yield f"  {tensor.name:<{width}}  {tensor.dtype:<8}  {shape:<18}  {size}"
    yield ""
    yield "totals"
    for dtype, (count, nbytes) in inspection.totals().items():
        yield f"  {dtype:<8}  {count:>6} tensors  {format_bytes(nbytes)}"
    total = sum(t.nbytes for t in inspection.tensors)
    yield f"  {'all':<8}  {len(inspection.tensors):>6} tensors  {format_bytes(total)}"


def _shown(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"items", "first"}:
        return f"[{value['items']} items: {', '.join(map(repr, value['first']))}, ...]"
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
