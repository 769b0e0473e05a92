"""GGUF headers read with explicit bounds: magic, version, counts, key/value pairs, tensor infos.

Every count and length is checked against the bytes the file has left before anything is
allocated from it, so a hostile header is refused in time and memory proportional to the file
(never more). Versions 2 and 3 are read, in either byte order. Every failure is a
CheckpointError naming the file, the key or tensor, the byte offset and what was expected.
Imports numpy, gguf and the io layer only.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, BinaryIO

from gguf import GGUFValue, GGUFValueType
from gguf.constants import GGUF_DEFAULT_ALIGNMENT

from lazyparams.errors import CheckpointError
from lazyparams.io.gguf_cursor import UNREADABLE, Cursor
from lazyparams.io.gguf_tensors import (
    MIN_TENSOR_BYTES,
    GGUFTensorEntry,
    check_data_area,
    read_tensor_infos,
)
from lazyparams.io.gguf_values import read_value
from lazyparams.io.mapguard import guarded_file, raise_if_source_shrank

MAGIC = b"GGUF"
VERSIONS = (2, 3)
ALIGNMENT_KEY = "general.alignment"
MIN_KV_BYTES = 8 + 1 + 4 + 1
"""The fewest bytes a key/value pair takes: key length, a one-byte key, value type, a byte."""
_HEADER = "the file header"


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """What a GGUF file's header says, every part checked: its key/value pairs in file order
    (arrays of fixed-size scalars as numpy arrays, see `gguf_values.plain`), its tensors in
    file order (offsets from the start of the file), the data alignment and where the data
    area starts; `byte_order` is "<" or ">"."""

    path: str
    version: int
    byte_order: str
    values: dict[str, GGUFValue]
    tensors: list[GGUFTensorEntry]
    alignment: int
    data_offset: int


def read_gguf_header(path: str | os.PathLike[str]) -> GGUFHeader:
    """The checked header of the GGUF file at `path`, or a CheckpointError saying what is
    wrong where; the file is mapped, so only the header's pages are read. A file that shrinks
    while its header is read is a CheckpointError saying so (see `io.mapguard`)."""
    with _mapped(str(path)) as data:
        try:
            header = parse_gguf_header(data, str(path))
        except CheckpointError:
            raise_if_source_shrank()  # the truncation, not what the zeros it left look like
            raise
        raise_if_source_shrank()
        return header


def parse_gguf_header(data: Any, path: str) -> GGUFHeader:
    """The checked header held in `data` (the bytes of a whole file, or a map of them)."""
    cur = Cursor(data, path)
    version = _preamble(cur)
    tensor_count, kv_count = _counts(cur)
    values, positions = _key_values(cur, kv_count)
    alignment = _alignment(cur, values, positions)
    entries = read_tensor_infos(cur, tensor_count, alignment)
    start = check_data_area(cur, entries, alignment)
    tensors = [entry._replace(offset=start + entry.offset) for entry in entries]
    return GGUFHeader(path, version, cur.order, values, tensors, alignment, start)


@contextmanager
def _mapped(path: str) -> Iterator[Any]:
    """The bytes of the regular file `path`, mapped read-only (read, when too small to map);
    anything else (a folder, a pipe, a device) is refused before it is opened. The map is a
    guarded one where the extension is built, else a plain one: a header is read in
    milliseconds, so only that long may the file's shrinking crash the process."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise CheckpointError(f"{path}: {UNREADABLE}: not a regular file")
        file = open(path, "rb")  # noqa: SIM115 - kept open while the map is read
    except OSError as err:
        raise CheckpointError(f"{path}: {UNREADABLE}: cannot open: {err.strerror}") from None
    with file:
        try:
            data = _map_file(file, path)
        except OSError as err:
            raise CheckpointError(f"{path}: {UNREADABLE}: cannot open: {err.strerror}") from None
        try:
            yield data
        finally:
            if isinstance(data, mmap.mmap):  # a guarded map goes with its last reference
                _close(data)


def _map_file(file: BinaryIO, path: str) -> Any:
    """The whole of `file`: read when smaller than a page, else mapped (guarded if it can be)."""
    info = os.fstat(file.fileno())
    if info.st_size < mmap.PAGESIZE:
        return file.read()
    guarded = guarded_file(file.fileno(), f"{path}: the header", info)
    if guarded is not None:
        return guarded
    return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _close(data: mmap.mmap) -> None:
    """Unmap `data`; a view still held elsewhere (by a traceback) keeps it until released."""
    with suppress(BufferError):
        data.close()


def _preamble(cur: Cursor) -> int:
    """The magic and the version; a version whose low half is zero means the other byte
    order, as GGUF's readers decide it."""
    magic = cur.raw(4, _HEADER, "the magic")
    if magic != MAGIC:
        cur.fail(_HEADER, f"the magic is {magic!r}; expected {MAGIC!r}", 0)
    version = cur.u32(_HEADER, "the version")
    if version and not version & 0xFFFF:
        cur.set_order(">")
        version = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in VERSIONS:
        cur.fail(
            _HEADER,
            f"version {version}; expected version 2 or 3 (version 1 files are no "
            "longer read: rewrite them with a current llama.cpp)",
            4,
        )
    return version


def _counts(cur: Cursor) -> tuple[int, int]:
    """The tensor and key/value counts, refused unless the file can hold that many."""
    tensors = cur.u64(_HEADER, "the tensor count")
    pairs = cur.u64(_HEADER, "the key/value count")
    least = tensors * MIN_TENSOR_BYTES + pairs * MIN_KV_BYTES
    if least > cur.left():
        cur.fail(
            _HEADER,
            f"{tensors} tensors and {pairs} key/value pairs need at least {least} "
            f"bytes but {cur.left()} follow the counts; expected counts the file can hold",
            8,
        )
    return tensors, pairs


def _key_values(cur: Cursor, count: int) -> tuple[dict[str, GGUFValue], dict[str, int]]:
    """`count` key/value pairs in file order, and the byte offset of each."""
    values: dict[str, GGUFValue] = {}
    positions: dict[str, int] = {}
    for index in range(count):
        at = cur.pos
        key = cur.text(f"key/value pair {index}", "the key")
        where = f"metadata key {key!r}"
        if not key:
            cur.fail(f"key/value pair {index}", "the key is empty; expected a name", at)
        if key in values:
            cur.fail(where, f"appears twice (first at byte {positions[key]}); expected once", at)
        positions[key] = at
        values[key] = read_value(cur, where)
    return values, positions


def _alignment(cur: Cursor, values: dict[str, GGUFValue], positions: dict[str, int]) -> int:
    """The data alignment: general.alignment when set (a UINT32 power of two), else 32."""
    value = values.get(ALIGNMENT_KEY)
    if value is None:
        return GGUF_DEFAULT_ALIGNMENT
    number = value.value
    if value.type != GGUFValueType.UINT32 or number < 1 or number & (number - 1):
        shown = f"{value.type.name} {number!r}"[:60]
        cur.fail(
            f"metadata key {ALIGNMENT_KEY!r}",
            f"is {shown}; expected a UINT32 power of two",
            positions[ALIGNMENT_KEY],
        )
    return int(number)
