"""Valid GGUF files for the reader tests, and where their fields lie (found by gguf's reader).

`write_sample` writes a file with a pair of every value type and tensors of plain and block
types; `kv_at` and `tensor_at` give the byte offsets of one pair's or one tensor info's parts,
so a test can flip, extend or truncate exactly one field.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSource, read_gguf_metadata
from lazyparams.io.gguf_reader import read_gguf_header

T = GGUFValueType
SCALARS: dict[str, tuple[Any, GGUFValueType]] = {
    "s.u8": (200, T.UINT8),
    "s.i8": (-100, T.INT8),
    "s.u16": (60000, T.UINT16),
    "s.i16": (-30000, T.INT16),
    "s.u32": (4_000_000_000, T.UINT32),
    "s.i32": (-2_000_000_000, T.INT32),
    "s.f32": (0.1, T.FLOAT32),
    "s.bool": (True, T.BOOL),
    "s.str": ("héllo", T.STRING),
    "s.u64": (2**64 - 1, T.UINT64),
    "s.i64": (-(2**63), T.INT64),
    "s.f64": (float("nan"), T.FLOAT64),
}
ARRAYS: dict[str, tuple[list[Any], GGUFValueType]] = {
    "a.u8": ([0, 255, 7], T.UINT8),
    "a.i16": ([-1, 2, -3], T.INT16),
    "a.i32": ([1, -2, 3, -4], T.INT32),
    "a.f32": ([0.5, -1.25, float("inf")], T.FLOAT32),
    "a.bool": ([True, False, True], T.BOOL),
    "a.u64": ([2**64 - 1, 0], T.UINT64),
    "a.f64": ([1e300, -0.0], T.FLOAT64),
    "a.str": (["a", "", "ü€", "tok"], T.STRING),
}
TENSORS: dict[str, tuple[np.ndarray, GGMLQuantizationType | None]] = {
    "tok_embd.weight": (np.arange(12, dtype=np.float32).reshape(3, 4), None),
    "blk.0.attn_q.weight": (np.arange(6, dtype=np.float16).reshape(2, 3), None),
    "blk.0.ffn.weight": (np.arange(68, dtype=np.uint8).reshape(2, 34), GGMLQuantizationType.Q8_0),
    "blk.0.ids": (np.arange(5, dtype=np.int32), None),
    "blk.0.pos": (np.arange(3, dtype=np.int16), None),
}


def write_sample(
    path: Path,
    *,
    big_endian: bool = False,
    alignment: int | None = None,
    tensors: bool = True,
    **extra: Any,
) -> Path:
    """A valid GGUF at `path`: every scalar and array pair above, then the tensors above.

    `extra` adds pairs (key with dots spelled as double underscores -> (value, type[, sub]));
    without `tensors` the file ends right after its pairs (no padding), so a test may cut or
    splice pairs without moving any data."""
    endian = GGUFEndian.BIG if big_endian else GGUFEndian.LITTLE
    writer = GGUFWriter(path, "llama", endianess=endian)
    for key, (value, kind) in SCALARS.items():
        writer.add_key_value(key, value, kind)
    for key, (items, sub) in ARRAYS.items():
        writer.add_key_value(key, items, T.ARRAY, sub)
    for key, spec in extra.items():
        writer.add_key_value(key.replace("__", "."), *spec)
    if alignment is not None:
        writer.add_uint32("general.alignment", alignment)
        writer.data_alignment = alignment
    for name, (array, raw) in TENSORS.items() if tensors else ():
        data = array.byteswap() if big_endian and raw is None else array
        writer.add_tensor(name, data, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    if tensors:
        writer.write_tensors_to_file()
    writer.close()
    return path


def kv_at(path: Path, key: str) -> dict[str, int]:
    """Byte offsets of one pair's parts: start (key length), type, and for an array item_type,
    count and first item; else value."""
    field = GGUFReader(path).fields[key]
    start = field.offset
    type_at = start + 8 + len(key.encode())
    found = {"start": start, "type": type_at, "value": type_at + 4}
    if field.types[0] == T.ARRAY:
        found |= {"item_type": type_at + 4, "count": type_at + 8, "items": type_at + 16}
    return found


def tensor_at(path: Path, name: str) -> dict[str, int]:
    """Byte offsets of one tensor info's parts: start, n_dims, dims, type, offset."""
    tensor = next(t for t in GGUFReader(path).tensors if t.name == name)
    start = tensor.field.offset
    n_dims = start + 8 + len(name.encode())
    dims = n_dims + 4
    kind = dims + 8 * len(tensor.shape)
    return {"start": start, "n_dims": n_dims, "dims": dims, "type": kind, "offset": kind + 4}


def patched(src: Path, dst: Path, at: int, fmt: str, value: Any) -> Path:
    """A copy of `src` at `dst` with `value` packed as struct format `fmt` at byte `at`."""
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, at, value)
    dst.write_bytes(bytes(data))
    return dst


def spliced(src: Path, dst: Path, at: int, cut: int, insert: bytes) -> Path:
    """A copy of `src` at `dst` with `cut` bytes at `at` replaced by `insert`."""
    data = src.read_bytes()
    dst.write_bytes(data[:at] + insert + data[at + cut :])
    return dst


def refused(path: Path, *culprits: str) -> str:
    """The header error `path` gets: it starts with the path, holds every culprit (key or
    tensor, byte offset) and says what was expected; the source and the metadata reader give
    the same one."""
    with pytest.raises(CheckpointError) as err:
        read_gguf_header(path)
    message = str(err.value)
    assert message.startswith(f"{path}: not a readable GGUF file: "), message
    for culprit in culprits:
        assert culprit in message, (culprit, message)
    assert "expected" in message, message
    for reader in (GGUFSource, read_gguf_metadata):
        with pytest.raises(CheckpointError) as again:
            reader(path)
        assert str(again.value) == message
    return message


def with_pair(src: Path, dst: Path, key: str, value: bytes) -> Path:
    """A copy of `src` (a file without tensors) with one more pair, `key` and the raw `value`
    bytes (its type id first), appended and counted."""
    data = bytearray(src.read_bytes())
    struct.pack_into("<Q", data, 16, struct.unpack_from("<Q", data, 16)[0] + 1)
    encoded = key.encode()
    dst.write_bytes(bytes(data) + struct.pack("<Q", len(encoded)) + encoded + value)
    return dst


def nested_array(depth: int) -> bytes:
    """The raw value of `depth` arrays nested in one another, one INT32 (7) innermost."""
    value = struct.pack("<IIQi", T.ARRAY, T.INT32, 1, 7)
    for _ in range(depth - 1):
        value = struct.pack("<IIQ", T.ARRAY, T.ARRAY, 1) + value[4:]
    return value
