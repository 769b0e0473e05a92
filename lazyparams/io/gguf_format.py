"""GGUF checkpoints: a source (its header read with bounds by gguf_reader) and a streaming sink.

Element types (F32, F16, BF16, F64, I8-I64) and GGML's block types (Q8_0, Q4_K, IQ2_XS, ...,
see `lazyparams.block_types`) are read and written; a block-typed tensor moves as its raw
blocks (uint8 rows, its logical shape in the header). GGUF stores dimensions innermost first,
which both directions reverse into numpy order. The head is packed by `gguf_header`. Imports
gguf and the io layer only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gguf import GGMLQuantizationType

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase, TensorInfo, open_binary
from lazyparams.io.dtypes import numpy_dtype, storage_shape
from lazyparams.io.filemap import map_array
from lazyparams.io.gguf_header import TableEntry, head_bytes, pad
from lazyparams.io.gguf_metadata import GGUFMetadata, check_gguf_metadata
from lazyparams.io.gguf_reader import read_gguf_header
from lazyparams.io.gguf_split import SplitPosition, plan_gguf_parts, split_position
from lazyparams.io.output_names import check_gguf_names
from lazyparams.io.placed_sink import PlacedSink

_Q = GGMLQuantizationType
GGML_TO_DTYPE: dict[GGMLQuantizationType, str] = {
    _Q.F32: "float32",
    _Q.F16: "float16",
    _Q.BF16: "bfloat16",
    _Q.F64: "float64",
    _Q.I8: "int8",
    _Q.I16: "int16",
    _Q.I32: "int32",
    _Q.I64: "int64",
}
DTYPE_TO_GGML = {dtype: ggml for ggml, dtype in GGML_TO_DTYPE.items()}
"""The element types; the block types map through `_GGML_OF` and `_DTYPE_OF` too."""
_DTYPE_OF = {**GGML_TO_DTYPE, **{_Q(b.ggml_id): name for name, b in BLOCK_TYPES.items()}}
_GGML_OF = {dtype: ggml for ggml, dtype in _DTYPE_OF.items()}


class GGUFSource(SourceBase):
    """A GGUF file; every tensor is listed, block-typed ones with their logical shape, and
    loaded as their raw blocks; a GGML type lazyparams does not know is refused by info and
    load (and only there, so a spec that leaves such a tensor alone still reads the file).

    A part of a split set is refused (its tensors are only some of the model's) unless
    `split_part` is set, as the split source does; `split` says where the part stands. The
    whole header is checked first (`read_gguf_header`: bounds, types, an exactly tiled data
    area), so every tensor listed lies inside the file in bytes of its own.
    """

    def __init__(self, path: str | os.PathLike[str], *, split_part: bool = False) -> None:
        self.path = str(path)
        header = read_gguf_header(path)
        self.split: SplitPosition | None = split_position(header.values, self.path)
        if self.split is not None and self.split.count > 1 and not split_part:
            raise CheckpointError(
                f"{self.path}: part {self.split.no + 1} of {self.split.count} of a split GGUF; "
                "expected it opened with open_source, which reads every part"
            )
        if header.byte_order != "<":
            raise CheckpointError(
                f"{self.path}: byte-swapped (big-endian) GGUF is not supported; "
                "expected a little-endian file"
            )
        self._order = [tensor.name for tensor in header.tensors]
        self._offsets = {tensor.name: tensor.offset for tensor in header.tensors}
        self._quantized: dict[str, str] = {}
        self._infos = {}
        for tensor in header.tensors:
            dtype = _DTYPE_OF.get(tensor.ggml_type)
            if dtype is None:
                self._quantized[tensor.name] = tensor.ggml_type.name
            else:
                self._infos[tensor.name] = TensorInfo(
                    tensor.name, tensor.shape, dtype, tensor.nbytes
                )
        self._file = open_binary(self.path)

    def names(self) -> list[str]:
        """Every tensor in file order, quantized ones included."""
        return list(self._order)

    def info(self, name: str) -> TensorInfo:
        """Shape (numpy order) and dtype of a tensor of a known GGML type."""
        if name in self._quantized:
            raise CheckpointError(
                f"{self.path}: tensor {name!r} has GGML type {self._quantized[name]}, which "
                f"lazyparams cannot read (it reads {', '.join(t.name for t in _DTYPE_OF)})"
            )
        return super().info(name)

    def load(self, name: str) -> Array:
        """The tensor as a read-only view into the file (uint8 rows of blocks for a block
        type)."""
        info = self.info(name)
        dtype, shape = numpy_dtype(info.dtype), storage_shape(info.dtype, info.shape)
        fd = self._fileno(self._file)
        return map_array(
            fd, self._offsets[name], dtype, shape, path=f"{self.path}: tensor {name!r}"
        )

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`, mapping only their bytes."""
        self.info(name)
        return self._map_rows(self._fileno(self._file), self._offsets[name], name, start, stop)

    def close(self) -> None:
        """Close the file; arrays already returned stay valid."""
        self._file.close()


class GGUFSink(PlacedSink):
    """A GGUF file whose header and tensor table are written up front; data lands by offset.

    `metadata` (key -> `gguf.GGUFValue` or plain value, see `check_gguf_metadata`) is written in
    order after general.architecture (from `metadata`, else `arch`). With `shard_size`, the
    output is llama.cpp's split layout when it needs more than one part (see `plan_gguf_parts`);
    every part is published together. A 0-d tensor is stored with the single dimension 1, as
    ggml has no 0-d tensors; it reads back with shape (1,).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        infos: Sequence[TensorInfo],
        *,
        metadata: Mapping[str, Any] | None = None,
        arch: str | None = None,
        shard_size: int | None = None,
    ) -> None:
        check_gguf_dtypes(path, infos)
        header = check_gguf_metadata(metadata, arch=arch, where=str(path))
        check_gguf_names(str(path), [info.name for info in infos])
        super().__init__(str(path), infos)
        try:
            self.parts = plan_gguf_parts(Path(path), list(self.infos.values()), shard_size, header)
            for part in self.parts:
                self._lay_out(self._staging.new_file(part.path), part.infos, part.metadata)
        except BaseException:
            self.abort()
            raise

    @property
    def files(self) -> list[Path]:
        """The final paths this sink publishes, in part order."""
        return [part.path for part in self.parts]

    def _lay_out(self, temp: Path, infos: Sequence[TensorInfo], metadata: GGUFMetadata) -> None:
        offsets, _ = lay_out_gguf(temp, infos, metadata)
        self._place(temp, offsets)


def lay_out_gguf(
    path: Path, infos: Sequence[TensorInfo], metadata: GGUFMetadata
) -> tuple[dict[str, int], int]:
    """Write a GGUF file's header and tensor table to `path` and size the file for its data;
    returns each tensor's data offset and the file's size (the data is left to the caller)."""
    table = [
        TableEntry(info.name, tuple(info.shape), int(_GGML_OF[info.dtype]), info.nbytes)
        for info in infos
    ]
    head, relative = head_bytes(metadata.arch, metadata.values.items(), table, metadata.alignment)
    start = pad(len(head), metadata.alignment)
    with open(path, "wb") as file:
        file.write(head)
    offsets = {info.name: start + at for info, at in zip(infos, relative, strict=True)}
    size = start + sum(pad(info.nbytes, metadata.alignment) for info in infos)
    os.truncate(path, size)
    return offsets, size


def check_gguf_dtypes(path: str | os.PathLike[str], infos: Sequence[TensorInfo]) -> None:
    """Refuse a tensor whose dtype GGUF has no type for."""
    for info in infos:
        if info.dtype not in _GGML_OF:
            raise CheckpointError(
                f"{path}: tensor {info.name!r}: GGUF has no type for {info.dtype}; expected "
                f"one of {', '.join(DTYPE_TO_GGML)} or a GGML block type (for quantized "
                "weights, R.quantize_gguf: q8_0, q4_0, ...)"
            )
