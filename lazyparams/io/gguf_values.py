"""GGUF key/value values read with bounds: scalars, strings, and arrays of them.

Value types are checked against GGUF's list; an array's length is checked against the bytes
left before anything is read (every item needs at least its fixed size, a string at least its
length field); arrays of fixed-size scalars are read with one numpy call, arrays of strings in
one pass; nested arrays are read to a bounded depth. Values come back as `gguf.GGUFValue`s: int,
float, bool, str (bytes where a string is not UTF-8), lists of strings or arrays, and numpy
arrays for arrays of fixed-size scalars (`plain` makes them lists).
Imports numpy, gguf and the io layer only.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from gguf import GGUFValue, GGUFValueType

from lazyparams.io.gguf_cursor import Cursor

_T = GGUFValueType
MAX_ARRAY_DEPTH = 4
"""Arrays of arrays are read this deep at most (llama.cpp reads none; gguf-py writes them)."""
MAX_INNER_ARRAYS = 4096
"""And at most this many arrays inside arrays in one file, as each costs a Python object."""
NUMPY_TYPES: dict[GGUFValueType, str] = {
    _T.UINT8: "u1",
    _T.INT8: "i1",
    _T.UINT16: "u2",
    _T.INT16: "i2",
    _T.UINT32: "u4",
    _T.INT32: "i4",
    _T.FLOAT32: "f4",
    _T.BOOL: "u1",
    _T.UINT64: "u8",
    _T.INT64: "i8",
    _T.FLOAT64: "f8",
}
"""The fixed-size scalar types, as numpy type codes (a BOOL is one byte, 0 or 1)."""
_STRUCT_CODES = {"u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i", "f4": "f"}
_STRUCT_CODES |= {"u8": "Q", "i8": "q", "f8": "d"}
_MIN_ITEM_BYTES = {_T.STRING: 8, _T.ARRAY: 12}
"""The fewest bytes an item of a variable-size type takes (its length fields)."""
_VALUE_TYPES = {kind.value: kind for kind in GGUFValueType}
_TYPE_NAMES = ", ".join(f"{kind.value} ({kind.name})" for kind in GGUFValueType)


def value_type(cur: Cursor, where: str, what: str) -> GGUFValueType:
    """A u32 value type id, refused unless GGUF defines it."""
    at = cur.pos
    type_id = cur.u32(where, what)
    kind = _VALUE_TYPES.get(type_id)
    if kind is None:
        cur.fail(where, f"{what} is {type_id}; expected one of {_TYPE_NAMES}", at)
    return kind


def read_value(cur: Cursor, where: str, depth: int = 0) -> GGUFValue:
    """One value: its u32 type, then a scalar, a string, or an array's item type, u64 length
    and items."""
    kind = value_type(cur, where, "the value type")
    if kind != _T.ARRAY:
        return GGUFValue(read_scalar(cur, kind, where), kind)
    return read_array(cur, where, depth + 1)


def read_scalar(cur: Cursor, kind: GGUFValueType, where: str) -> Any:
    """One value of the scalar type `kind` as a plain Python value."""
    if kind == _T.STRING:
        return _as_text(cur.string(where, "the string value"))
    at = cur.pos
    value = cur.unpack(_STRUCT_CODES[NUMPY_TYPES[kind]], where, f"the {kind.name} value")
    if kind == _T.BOOL:
        return _as_bool(cur, value, where, at)
    return value


def read_array(cur: Cursor, where: str, depth: int) -> GGUFValue:
    """An array's item type, length and items; the length is checked against the bytes left
    before any item is read."""
    if depth > MAX_ARRAY_DEPTH:
        cur.fail(where, f"arrays nested {depth} deep; expected at most {MAX_ARRAY_DEPTH}")
    sub = value_type(cur, where, "the array's item type")
    count = cur.u64(where, "the array's length")
    if sub in NUMPY_TYPES:
        return GGUFValue(_fixed_items(cur, sub, count, where), _T.ARRAY, sub)
    cur.need(count * _MIN_ITEM_BYTES[sub], where, f"an array of {count} {sub.name} items")
    if sub == _T.STRING:
        return GGUFValue(_strings(cur, count, where), _T.ARRAY, sub)
    cur.inner_arrays += count
    if cur.inner_arrays > MAX_INNER_ARRAYS:
        cur.fail(
            where,
            f"{cur.inner_arrays} arrays inside arrays so far; expected at most "
            f"{MAX_INNER_ARRAYS} in one file (llama.cpp reads none)",
        )
    items = [read_array(cur, f"{where}, item {index}", depth + 1) for index in range(count)]
    return GGUFValue(items, _T.ARRAY, sub)


def _fixed_items(cur: Cursor, kind: GGUFValueType, count: int, where: str) -> np.ndarray[Any, Any]:
    """`count` items of a fixed-size scalar type, read at once as a numpy array (a list of
    them as Python objects can take 40 times the bytes, so it is made only when asked for)."""
    at = cur.pos
    items = cur.array(NUMPY_TYPES[kind], count, where, f"an array of {count} {kind.name} items")
    if kind == _T.BOOL:
        bad = np.flatnonzero(items > 1)
        if bad.size:
            _as_bool(cur, int(items[bad[0]]), f"{where}, item {int(bad[0])}", at + int(bad[0]))
        items = items.astype(bool)
    return items


def plain(value: GGUFValue) -> GGUFValue:
    """`value` with an array of fixed-size scalars turned into a list of Python values."""
    if isinstance(value.value, np.ndarray):
        return GGUFValue(value.value.tolist(), value.type, value.sub_type)
    return value


def _strings(cur: Cursor, count: int, where: str) -> list[str | bytes]:
    """`count` strings in one pass, each length checked against the bytes left."""
    data, pos, size = cur.data, cur.pos, cur.size
    length_of = struct.Struct(cur.order + "Q").unpack_from
    items: list[str | bytes] = []
    for index in range(count):
        if size - pos < 8:
            cur.pos = pos
            cur.need(8, f"{where}, item {index}", "the string's length")
        (length,) = length_of(data, pos)
        if length > size - pos - 8:
            cur.pos = pos + 8
            cur.need(length, f"{where}, item {index}", "the string", pos)
        items.append(_as_text(data[pos + 8 : pos + 8 + length]))
        pos += 8 + length
    cur.pos = pos
    return items


def _as_text(raw: bytes) -> str | bytes:
    """String bytes as str, or the bytes themselves where they are not valid UTF-8 (GGUF
    strings should be UTF-8, but values that are not are kept, not refused)."""
    if raw.isascii():
        return raw.decode("ascii")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(raw)


def _as_bool(cur: Cursor, byte: int, where: str, at: int) -> bool:
    """A BOOL's byte as a bool; refused unless it is 0 or 1."""
    if byte not in (0, 1):
        cur.fail(where, f"a BOOL byte of {byte}; expected 0 or 1", at)
    return bool(byte)
