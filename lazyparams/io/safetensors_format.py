"""The safetensors layout: header parsing with validation, and header building for the writer.

A file is an 8-byte little-endian header length, a JSON header (per tensor: dtype, shape,
data_offsets relative to the data area; optional `__metadata__`), then the data area. The reader
refuses what the reference library refuses (gaps and trailing bytes included) and also duplicate
keys, names with NUL or lone surrogates, unknown entry keys and ranks over 16; the writer lays
tensors out exactly as the reference does. Imports numpy and io.limits only.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.base import TensorInfo
from lazyparams.io.dtypes import itemsize
from lazyparams.io.limits import (
    MAX_DIM,
    MAX_ELEMENTS,
    MAX_INT_DIGITS,
    MAX_NAME_BYTES,
    MAX_RANK,
    check_name,
    check_shape,
    load_json,
    short_repr,
)

HEADER_LIMIT = 100 * 1000 * 1000
METADATA_KEY = "__metadata__"

# Codes in the order of the reference implementation's dtype enum: the writer places larger
# codes first (then sorts by name), so this order decides the byte layout.
_CODE_ORDER = (
    ("BOOL", "bool"),
    ("U8", "uint8"),
    ("I8", "int8"),
    ("F8_E5M2", "float8_e5m2"),
    ("F8_E4M3", "float8_e4m3fn"),
    ("I16", "int16"),
    ("U16", "uint16"),
    ("F16", "float16"),
    ("BF16", "bfloat16"),
    ("I32", "int32"),
    ("U32", "uint32"),
    ("F32", "float32"),
    ("F64", "float64"),
    ("I64", "int64"),
    ("U64", "uint64"),
)
CODE_TO_DTYPE = dict(_CODE_ORDER)
DTYPE_TO_CODE = {dtype: code for code, dtype in _CODE_ORDER}
_RANK = {dtype: rank for rank, (_, dtype) in enumerate(_CODE_ORDER)}
_ITEMSIZE = {dtype: itemsize(dtype) for dtype in CODE_TO_DTYPE.values()}


@dataclass(frozen=True, slots=True)
class Entry:
    """One tensor of a parsed header: its info and its byte range inside the data area."""

    info: TensorInfo
    begin: int
    end: int


@dataclass(frozen=True, slots=True)
class Header:
    """A validated header: entries in header order, metadata, and where the data area starts."""

    entries: dict[str, Entry]
    metadata: dict[str, str] | None
    data_start: int


def parse_header(
    prefix: bytes, read_json: Callable[[int], bytes], file_size: int, path: str
) -> Header:
    """Validate the 8-byte `prefix` and the JSON that `read_json(n)` returns, against the file.

    Refuses what the reference reader refuses (a header length past the file or over
    HEADER_LIMIT, invalid JSON, unknown dtypes, offsets that disagree with shape x itemsize, a
    data area not covered exactly) and more: see `check_layout` and `_parse_entry`.
    """
    length = _header_length(prefix, file_size, path)
    raw = _decode_json(_read_exactly(read_json, length, path), path)
    metadata = _parse_metadata(raw.pop(METADATA_KEY, None), path)
    entries = {name: _parse_entry(name, value, path) for name, value in raw.items()}
    check_layout(entries, file_size - 8 - length, path)
    return Header(entries, metadata, 8 + length)


def _header_length(prefix: bytes, file_size: int, path: str) -> int:
    """The header length the prefix declares, refused past HEADER_LIMIT or the file's end."""
    if len(prefix) < 8:
        raise CheckpointError(f"{path}: file of {file_size} bytes is too short for a header")
    (length,) = struct.unpack("<Q", prefix)
    if length > HEADER_LIMIT:
        raise CheckpointError(f"{path}: header length {length} exceeds the limit {HEADER_LIMIT}")
    if 8 + length > file_size:
        raise CheckpointError(
            f"{path}: header length {length} runs past the end of the file ({file_size} bytes)"
        )
    return int(length)


def _read_exactly(read: Callable[[int], bytes], length: int, path: str) -> bytes:
    """`length` bytes from `read`; a file cut short since its size was taken is refused."""
    data = read(length)
    if len(data) != length:
        raise CheckpointError(
            f"{path}: header cut short: read {len(data)} of its {length} bytes; the file "
            "changed or was truncated while it was read"
        )
    return data


def _decode_json(data: bytes, path: str) -> dict[str, Any]:
    """The header's JSON object, or a CheckpointError saying why it is none."""
    try:
        raw = load_json(data, path, "header")
    except CheckpointError as err:
        raise _naming_long_integer(err, data) from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    return raw


def _naming_long_integer(err: CheckpointError, data: bytes) -> CheckpointError:
    """`err`; where it refuses an integer of too many digits, told of the tensor whose entry
    holds that integer."""
    culprit = _entry_with_long_integer(data) if "digits" in str(err) else None
    if culprit is None:
        return err
    return CheckpointError(
        f"{err}, in the entry of tensor {culprit!r}; expected integers of at most "
        f"{MAX_INT_DIGITS} digits"
    )


def _entry_with_long_integer(data: bytes) -> str | None:
    """The tensor whose entry holds an integer of more than MAX_INT_DIGITS digits, found by a
    second parse that keeps no integer (None when the header fails for another reason)."""
    too_long = object()

    def marker(digits: str) -> object:
        return too_long if len(digits.lstrip("-")) > MAX_INT_DIGITS else 0

    try:
        raw = json.loads(data.decode("utf-8", "replace"), parse_int=marker)
    except (ValueError, RecursionError):
        return None
    for name, value in raw.items() if isinstance(raw, dict) else ():
        fields = value.values() if isinstance(value, dict) else ()
        items = [i for f in fields for i in (f if isinstance(f, list) else [f])]
        if any(item is too_long for item in items):
            return str(name)
    return None


def _parse_metadata(value: object, path: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise CheckpointError(f"{path}: {METADATA_KEY} must map strings to strings")
    for text in (*value, *value.values()):
        if not _encodable(text):
            raise CheckpointError(
                f"{path}: {METADATA_KEY} holds {text!r}, which is not valid Unicode (a lone "
                "surrogate); expected UTF-8 text"
            )
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_entry(name: str, value: object, path: str) -> Entry:
    """One tensor's entry. Unlike the reference reader, keys other than the three are refused:
    a key we do not know (strides, a byte order) could change what the bytes mean."""
    plain = _plain_entry(name, value)
    if plain is not None:
        return plain
    check_name(name, path)
    where = f"{path}: tensor {name!r}"
    if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(f"{where}: expected keys dtype, shape, data_offsets")
    dtype = CODE_TO_DTYPE.get(value["dtype"]) if isinstance(value["dtype"], str) else None
    if dtype is None:
        raise CheckpointError(
            f"{where}: unknown or unsupported dtype {short_repr(value['dtype'], 40)} "
            f"(supported: {', '.join(CODE_TO_DTYPE)})"
        )
    shape, offsets = value["shape"], value["data_offsets"]
    if not isinstance(shape, list) or not _is_int_list(offsets) or len(offsets) != 2:
        raise CheckpointError(f"{where}: shape and data_offsets must be lists of integers >= 0")
    begin, end = offsets
    dims = check_shape(shape, where)
    info = TensorInfo(name, dims, dtype, math.prod(dims) * _ITEMSIZE[dtype])
    if end - begin != info.nbytes:
        raise CheckpointError(
            f"{where}: data_offsets [{begin}, {end}] hold {end - begin} bytes, but shape "
            f"{list(info.shape)} of {value['dtype']} needs {info.nbytes}"
        )
    return Entry(info, begin, end)


_ENTRY_KEYS = frozenset({"dtype", "shape", "data_offsets"})


def _plain_entry(name: str, value: object) -> Entry | None:
    """The entry of an ordinary tensor, found with fewer steps than the checks of
    `_parse_entry` (a 671B checkpoint has 92k entries); None for anything else, which then
    gets those checks and their messages.

    Ordinary: an ASCII name with no NUL and within MAX_NAME_BYTES, the three keys, a known
    dtype code, a shape of at most MAX_RANK ints in [0, MAX_DIM] holding at most MAX_ELEMENTS
    and offsets of two non-negative ints as far apart as its bytes.
    """
    if type(name) is not str or not name.isascii() or "\x00" in name:
        return None
    if type(value) is not dict or value.keys() != _ENTRY_KEYS or len(name) > MAX_NAME_BYTES:
        return None
    code, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    dtype = CODE_TO_DTYPE.get(code) if type(code) is str else None
    if dtype is None or type(shape) is not list or len(shape) > MAX_RANK:
        return None
    if not all(type(d) is int and 0 <= d <= MAX_DIM for d in shape):
        return None
    if type(offsets) is not list or len(offsets) != 2:
        return None
    begin, end = offsets
    if type(begin) is not int or type(end) is not int or begin < 0 or end < 0:
        return None
    dims = tuple(shape)
    elements = math.prod(dims)
    nbytes = elements * _ITEMSIZE[dtype]
    if elements > MAX_ELEMENTS or end - begin != nbytes:
        return None
    return Entry(TensorInfo(name, dims, dtype, nbytes), begin, end)


def _is_int_list(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    )


def check_layout(entries: dict[str, Entry], data_size: int, path: str) -> None:
    """Refuse a data area the tensors do not cover exactly, as the reference reader does.

    In order of (begin, end) each tensor must begin where the previous one ends (the first at
    0, a zero-size one included), and the last must end at the end of the file: no overlap,
    no hole, no trailing bytes.
    """
    cursor, previous = 0, None
    for entry in sorted(entries.values(), key=lambda e: (e.begin, e.end)):
        if entry.end > data_size:
            raise CheckpointError(
                f"{path}: tensor {entry.info.name!r}: data_offsets [{entry.begin}, {entry.end}] "
                f"lie outside the data area ({data_size} bytes); expected offsets inside it "
                "(the file is truncated or the header is wrong)"
            )
        if entry.begin < cursor and previous is not None:
            raise CheckpointError(
                f"{path}: tensors {previous.info.name!r} and {entry.info.name!r} overlap "
                f"(data_offsets [{previous.begin}, {previous.end}] and [{entry.begin}, "
                f"{entry.end}]); expected each tensor to begin where the previous one ends"
            )
        if entry.begin > cursor:
            raise CheckpointError(
                f"{path}: bytes [{cursor}, {entry.begin}) of the data area, before tensor "
                f"{entry.info.name!r}, belong to no tensor; expected the tensors to cover the "
                "data area with no gaps"
            )
        cursor, previous = entry.end, entry
    if cursor != data_size:
        raise CheckpointError(
            f"{path}: {data_size - cursor} bytes after the last tensor (data area of "
            f"{data_size} bytes, tensors end at {cursor}) belong to no tensor; expected the "
            "tensors to cover the data area exactly"
        )


def layout_order(infos: Iterable[TensorInfo]) -> list[TensorInfo]:
    """The reference writer's order: wider dtype codes first, then by name."""
    return sorted(infos, key=lambda info: (-_RANK.get(info.dtype, -1), info.name))


def build_header(
    infos: Iterable[TensorInfo], metadata: dict[str, str] | None = None, *, path: str = "<output>"
) -> tuple[bytes, dict[str, int]]:
    """The header bytes (length prefix included) and each tensor's absolute file offset.

    The JSON is compact, `__metadata__` comes first when given, and the header is padded with
    spaces to a multiple of 8 bytes, which is what the reference writer produces.
    """
    body: dict[str, Any] = {}
    if metadata is not None:
        body[METADATA_KEY] = dict(sorted(metadata.items()))
    begins: dict[str, int] = {}
    cursor = 0
    for info in layout_order(infos):
        code = _code(info, path)
        body[info.name] = {
            "dtype": code,
            "shape": list(info.shape),
            "data_offsets": [cursor, cursor + info.nbytes],
        }
        begins[info.name] = cursor
        cursor += info.nbytes
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    start = 8 + len(text)
    return struct.pack("<Q", len(text)) + text, {n: start + b for n, b in begins.items()}


def _code(info: TensorInfo, path: str) -> str:
    code = DTYPE_TO_CODE.get(info.dtype)
    where = f"{path}: tensor {info.name!r}"
    if code is None:
        raise CheckpointError(f"{where}: safetensors has no dtype for {info.dtype}")
    check_name(info.name, path)
    if info.name == METADATA_KEY:
        raise CheckpointError(f"{where}: the name is reserved for the header's metadata")
    return code
