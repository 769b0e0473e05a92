"""The head of a GGUF file as bytes: magic, version, counts, key/value pairs, tensor table.

The layout is GGUF version 3, little-endian, byte for byte as gguf-py's writer produces it:
general.architecture first (where the file has one), then the pairs in order, then each
tensor's name, dims (innermost first), GGML type and data offset. A numeric array is packed in
one numpy call and a string array in one pass, where the writer packs item by item (a
tokenizer's three arrays of 100k+ items took a noticeable part of a conversion, on one
thread). Imports numpy and the standard library only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MAGIC = b"GGUF"
VERSION = 3
ARCH_KEY = "general.architecture"
STRING, ARRAY = 8, 9
"""The GGUF value types of strings and arrays (GGUFValueType.STRING, .ARRAY)."""

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q"}
_SCALARS[12] = "d"
"""The struct format of each fixed-size GGUF value type, by its number."""


@dataclass(frozen=True, slots=True)
class TableEntry:
    """One row of the tensor table: `shape` in numpy order, `ggml_type` the GGML type's number,
    `nbytes` the data's size (the next tensor starts at it, padded to the alignment)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    nbytes: int


def pad(size: int, alignment: int) -> int:
    """`size` rounded up to a multiple of `alignment`."""
    return -(-size // alignment) * alignment


def head_bytes(
    arch: str | None, pairs: Iterable[tuple[str, Any]], table: Sequence[TableEntry], alignment: int
) -> tuple[bytes, list[int]]:
    """The file's head up to its tensor table's end, and each tensor's offset from the start of
    the data section (which begins at the head's size padded to `alignment`). `pairs` are
    (key, value) with values of gguf's GGUFValue shape: `.value`, `.type`, `.sub_type`."""
    kv = [(ARCH_KEY, _text(arch))] if arch else []
    kv += [(key, _value(value.value, int(value.type), value.sub_type)) for key, value in pairs]
    offsets, at = [], 0
    rows = []
    for entry in table:
        offsets.append(at)
        rows.append(_table_row(entry, at))
        at += pad(entry.nbytes, alignment)
    parts = [MAGIC, struct.pack("<IQQ", VERSION, len(table), len(kv))]
    for key, packed in kv:
        parts += (_string(key), packed)
    return b"".join(parts + rows), offsets


def _table_row(entry: TableEntry, offset: int) -> bytes:
    dims = entry.shape or (1,)
    return b"".join(
        (
            _string(entry.name),
            struct.pack(f"<I{len(dims)}QIQ", len(dims), *reversed(dims), entry.ggml_type, offset),
        )
    )


def _value(value: Any, kind: int, sub_type: Any) -> bytes:
    """A typed value: its type's number, then its bytes (an array: item type, count, items)."""
    if kind != ARRAY:
        return struct.pack("<I", kind) + _scalar(value, kind)
    sub = int(sub_type)
    return struct.pack("<IIQ", ARRAY, sub, len(value)) + _items(value, sub)


def _text(value: str) -> bytes:
    return struct.pack("<I", STRING) + _string(value)


def _scalar(value: Any, kind: int) -> bytes:
    if kind == STRING:
        return _string(value)
    return struct.pack("<" + _SCALARS[kind], value)


def _string(value: str | bytes) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return struct.pack("<Q", len(data)) + data


def _items(items: Sequence[Any], kind: int) -> bytes:
    """The items of an array of `kind`, packed together."""
    if kind == STRING:
        return b"".join([_string(item) for item in items])
    if kind == 7:  # bool: one byte, 1 for true
        return bytes(1 if item else 0 for item in items)
    return np.asarray(items, dtype="<" + _SCALARS[kind]).tobytes()
