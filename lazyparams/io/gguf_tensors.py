"""A GGUF file's tensor infos read with bounds, and its data area checked to be exactly tiled.

Each tensor info is checked as read: a unique UTF-8 name without NUL, at most 4 dimensions
(as ggml allows; a zero dimension is allowed, as ggml does), a GGML type id gguf knows, a row
that holds whole blocks, a bounded element count and an aligned offset. Then every tensor must
lie inside the file, no two may share a byte, and they must follow one another with only the
alignment's padding between them (the layout llama.cpp requires). Imports gguf and the io layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from lazyparams.errors import CheckpointError
from lazyparams.io.gguf_cursor import UNREADABLE, Cursor
from lazyparams.io.limits import MAX_DIM, MAX_ELEMENTS, MAX_NAME_BYTES, check_name, check_shape

MAX_DIMS = 4
"""GGML_MAX_DIMS: ggml tensors have at most 4 dimensions."""
MIN_TENSOR_BYTES = 8 + 4 + 4 + 8
"""The fewest bytes a tensor info takes: name length, dimension count, type id, offset."""
_GGML_TYPES = {kind.value: kind for kind in GGMLQuantizationType if kind in GGML_QUANT_SIZES}


class GGUFTensorEntry(NamedTuple):
    """One tensor info: name, GGML type, shape in numpy order (GGUF stores it innermost first),
    the byte offset of its data (from the start of the file once the header is read), its size
    in bytes and the byte offset of the info itself, for messages. (A named tuple: a header
    may list tens of thousands.)"""

    name: str
    ggml_type: GGMLQuantizationType
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    info_at: int


def pad(offset: int, alignment: int) -> int:
    """`offset` rounded up to a multiple of `alignment`."""
    return -(-offset // alignment) * alignment


def read_tensor_infos(cur: Cursor, count: int, alignment: int) -> list[GGUFTensorEntry]:
    """`count` tensor infos from the position; offsets are relative to the data area."""
    seen: dict[str, int] = {}
    entries = []
    for index in range(count):
        entry = _tensor_info(cur, index, alignment, seen)
        seen[entry.name] = index
        entries.append(entry)
    return entries


def _tensor_info(cur: Cursor, index: int, alignment: int, seen: dict[str, int]) -> GGUFTensorEntry:
    """One tensor info: name, dimensions, type id, offset, each checked as it is read."""
    at = cur.pos
    name = _name(cur, index, seen)
    where = f"tensor {name!r}"
    dims, type_id, offset = _fields(cur, where)
    kind = _ggml_type(cur, type_id, where, cur.pos - 12)
    if max(dims, default=0) > MAX_DIM or math.prod(dims) > MAX_ELEMENTS:
        prefix = f"{cur.path}: {UNREADABLE}: {where} at byte {at}"
        _bounded(check_shape, reversed(dims), prefix, "at most 2**62 elements")
    nbytes = _nbytes(cur, kind, dims, where, at)
    if offset % alignment:
        cur.fail(
            where,
            f"data offset {offset} is not a multiple of the alignment {alignment}; "
            "expected an aligned offset",
            cur.pos - 8,
        )
    return GGUFTensorEntry(name, kind, tuple(reversed(dims)), offset, nbytes, at)


def _name(cur: Cursor, index: int, seen: dict[str, int]) -> str:
    """Tensor `index`'s name: UTF-8 without NUL, within check_name's bound, not seen before."""
    at = cur.pos
    name = cur.text(f"tensor {index}", "the tensor name")
    if len(name) > MAX_NAME_BYTES // 4:  # only a name this long can pass check_name's bound
        prefix = f"{cur.path}: {UNREADABLE}: tensor {index} at byte {at}"
        _bounded(check_name, name, prefix, f"at most {MAX_NAME_BYTES} bytes")
    if name in seen:
        cur.fail(
            f"tensor {name!r}",
            f"is also the name of tensor {seen[name]}; expected unique names",
            at,
        )
    return name


def _bounded(check: Callable[[Any, str], object], value: Any, where: str, expected: str) -> None:
    """Run `check(value, where)` (a shared bound of io.limits) on a value that a cheaper test
    found past the bound; its refusal then also says what is expected."""
    try:
        check(value, where)
    except CheckpointError as err:
        raise CheckpointError(f"{err}; expected {expected}") from None


def _fields(cur: Cursor, where: str) -> tuple[list[int], int, int]:
    """The u32 dimension count (at most MAX_DIMS), then in one read the u64 dimensions
    (innermost first), the u32 type id and the u64 data offset."""
    at = cur.pos
    n_dims = cur.u32(where, "the number of dimensions")
    if n_dims > MAX_DIMS:
        cur.fail(where, f"{n_dims} dimensions; expected at most {MAX_DIMS} (as ggml)", at)
    *dims, type_id, offset = cur.unpack_many(
        f"{n_dims}QIQ", where, "the dimensions, the type id and the data offset"
    )
    return dims, type_id, offset


def _ggml_type(cur: Cursor, type_id: int, where: str, at: int) -> GGMLQuantizationType:
    """The GGML type of id `type_id`, refused unless gguf knows it and its block size."""
    kind = _GGML_TYPES.get(type_id)
    if kind is None:
        known = ", ".join(f"{k.value} ({k.name})" for k in _GGML_TYPES.values())
        cur.fail(where, f"GGML type id {type_id}; expected one of {known}", at)
    return kind


def _nbytes(cur: Cursor, kind: GGMLQuantizationType, dims: list[int], where: str, at: int) -> int:
    """The tensor's bytes; refused unless its rows (innermost dimension) hold whole blocks."""
    block, type_size = GGML_QUANT_SIZES[kind]
    row = dims[0] if dims else 1
    if row % block:
        cur.fail(
            where,
            f"rows of {row} values are not whole {kind.name} blocks of {block}; "
            f"expected a multiple of {block} as the innermost dimension",
            at,
        )
    return math.prod(dims) // block * type_size


def check_data_area(cur: Cursor, entries: Sequence[GGUFTensorEntry], alignment: int) -> int:
    """The data area's start: the position padded to `alignment`. Every tensor must lie inside
    the file, tile the area with only padding between tensors, and the file end there."""
    start = pad(cur.pos, alignment)
    if entries and start > cur.size:
        cur.fail(
            "the data area",
            f"starts at byte {start} (after padding to {alignment}) but the "
            f"file has {cur.size} bytes; expected the tensors' data after the header",
        )
    for entry in entries:
        _inside(cur, entry, start)
    end, last = _tiled(cur, sorted(entries, key=lambda e: (e.offset, e.nbytes)), start, alignment)
    if cur.size > pad(end, alignment):
        after = f"the end of tensor {last.name!r}" if last else "the header"
        cur.fail(
            "the data area",
            f"{cur.size - end} bytes follow {after} (byte {end}); expected "
            f"the file to end by byte {pad(end, alignment)}, the end padded to {alignment}",
            end,
        )
    return start


def _inside(cur: Cursor, entry: GGUFTensorEntry, start: int) -> None:
    """Refuse a tensor whose bytes run past the end of the file."""
    first = start + entry.offset
    if first + entry.nbytes > cur.size:
        cur.fail(
            f"tensor {entry.name!r}",
            f"its {entry.nbytes} bytes at data offset {entry.offset} "
            f"(bytes {first} to {first + entry.nbytes}) run past the end of the file at byte "
            f"{cur.size}; expected them inside the file (a truncated file?)",
            entry.info_at,
        )


def _tiled(
    cur: Cursor, ordered: Sequence[GGUFTensorEntry], start: int, alignment: int
) -> tuple[int, GGUFTensorEntry | None]:
    """The end (in the file) of the last tensor of `ordered` (sorted by offset), refusing
    any two that share bytes and any gap wider than the alignment's padding."""
    end, last = start, None
    for entry in ordered:
        first = start + entry.offset
        if first < end and last is not None:
            cur.fail(
                f"tensor {entry.name!r}",
                f"its bytes {first} to {first + entry.nbytes} overlap "
                f"those of tensor {last.name!r} (up to byte {end}); expected every tensor in "
                "bytes of its own",
                entry.info_at,
            )
        if first > pad(end, alignment):
            after = f"the end of tensor {last.name!r}" if last else "the start of the data area"
            cur.fail(
                f"tensor {entry.name!r}",
                f"its data starts at byte {first}, {first - end} bytes "
                f"after {after} (byte {end}); expected it at byte {pad(end, alignment)}, with "
                "no unused bytes between tensors beyond the alignment's padding",
                entry.info_at,
            )
        end, last = first + entry.nbytes, entry
    return end, last
