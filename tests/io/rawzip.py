"""Zip archives written byte by byte, so tests can make every field lie: sizes, CRCs, names,
methods, versions, offsets. Also the .npy and torch pieces the hostile-input tests put in them."""

from __future__ import annotations

import io
import struct
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.lib.format as npy

STORED, DEFLATED = 0, 8
_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")


@dataclass(frozen=True)
class Entry:
    """One member as written: `data` as stored, and what the headers declare about it."""

    name: bytes
    data: bytes
    size: int
    crc: int
    method: int = DEFLATED
    version: int = 20
    flags: int = 0
    packed: int | None = None  # declared compressed size (default: len(data))
    offset: int | None = None  # the central directory's local header offset (default: true)


def deflate(raw: bytes, level: int = 6) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(raw) + packer.flush()


def entry(
    name: str | bytes, raw: bytes, method: int = DEFLATED, level: int = 6, **changes: object
) -> Entry:
    """A truthful entry for `raw` (changes applied after)."""
    data = deflate(raw, level) if method == DEFLATED else raw
    label = name.encode() if isinstance(name, str) else name
    return replace(Entry(label, data, len(raw), zlib.crc32(raw), method), **changes)  # type: ignore[arg-type]


def write_zip(path: Path, entries: list[Entry]) -> Path:
    """Local headers and data, the central directory, the end record."""
    out, central, offsets = bytearray(), bytearray(), []
    for e in entries:
        offsets.append(len(out))
        packed = len(e.data) if e.packed is None else e.packed
        out += _LOCAL.pack(
            b"PK\x03\x04", e.version, e.flags, e.method, 0, 0, e.crc, packed, e.size,
            len(e.name), 0,
        )  # fmt: skip
        out += e.name + e.data
    start = len(out)
    for e, at in zip(entries, offsets, strict=True):
        packed = len(e.data) if e.packed is None else e.packed
        central += _CENTRAL.pack(
            b"PK\x01\x02", 20, e.version, e.flags, e.method, 0, 0, e.crc, packed, e.size,
            len(e.name), 0, 0, 0, 0, 0, at if e.offset is None else e.offset,
        )  # fmt: skip
        central += e.name
    out += central + _END.pack(b"PK\x05\x06", 0, 0, len(entries), len(entries), len(central),
                               start, 0)  # fmt: skip
    path.write_bytes(bytes(out))
    return path


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as numpy writes a .npy file."""
    buffer = io.BytesIO()
    npy.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npy_header_bytes(shape: tuple[int, ...], descr: str = "<f4", fortran: bool = False) -> bytes:
    """A version 1.0 header declaring `shape` of `descr`, without data."""
    buffer = io.BytesIO()
    npy.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": fortran, "shape": shape})
    return buffer.getvalue()
