"""The .npy pieces shared by the npz and npy-folder formats: headers, dtype tags, zip offsets.

numpy's .npy header cannot spell ml_dtypes types (bfloat16, float8, int4), so such tensors are
stored as unsigned bits of the same width and tagged with their real dtype: in a zip member's
comment for .npz, in a `dtypes.json` beside the files for a folder. Imports numpy only.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import numpy.lib.format as npy

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, TensorInfo
from lazyparams.io.dtypes import EXTENSION_DTYPES, bits_dtype, dtype_name, numpy_dtype

DTYPES_FILE = "dtypes.json"
COMMENT_PREFIX = b"lazyparams:dtype="
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature ... name length, extra length
_LOCAL_SIGNATURE = b"PK\x03\x04"


@dataclass(frozen=True, slots=True)
class NpyHeader:
    """A parsed .npy header: shape, whether Fortran order, stored dtype, header length."""

    shape: tuple[int, ...]
    fortran: bool
    stored: np.dtype[Any]
    length: int


def read_npy_header(fp: IO[bytes], where: str) -> NpyHeader:
    """Parse the header at the start of `fp`, refusing pickled (object) arrays."""
    try:
        version = npy.read_magic(fp)
        if version == (1, 0):
            shape, fortran, stored = npy.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, stored = npy.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except (ValueError, OSError, SyntaxError) as err:
        raise CheckpointError(f"{where}: not a readable .npy array: {err}") from None
    if stored.hasobject:
        raise CheckpointError(f"{where}: object arrays need pickle, which is never allowed")
    return NpyHeader(tuple(shape), bool(fortran), stored, fp.tell())


def tensor_info(name: str, header: NpyHeader, tag: str | None, where: str) -> TensorInfo:
    """The TensorInfo of a stored array, its dtype taken from the tag when there is one."""
    native = header.stored.newbyteorder("=")
    if tag is not None:
        if tag not in EXTENSION_DTYPES or bits_dtype(tag) != native:
            raise CheckpointError(f"{where}: dtype tag {tag!r} does not fit stored {native}")
        return TensorInfo.of(name, header.shape, tag)
    dtype = dtype_name(header.stored)
    if dtype is None:
        raise CheckpointError(
            f"{where}: unsupported dtype {header.stored} (ml_dtypes arrays saved by np.save lose "
            "their type unless tagged)"
        )
    return TensorInfo.of(name, header.shape, dtype)


def to_tensor(stored: Array, info: TensorInfo) -> Array:
    """Turn the array as stored into the tensor: native byte order, real dtype, read-only."""
    if not stored.dtype.isnative:
        stored = stored.astype(stored.dtype.newbyteorder("="))
    array = stored.view(numpy_dtype(info.dtype))
    array.flags.writeable = False
    return array


def stored_form(array: Array, dtype: str) -> Array:
    """The array to hand to numpy's writer: raw bits for dtypes its header cannot spell."""
    return array.view(bits_dtype(dtype)) if dtype in EXTENSION_DTYPES else array


def npy_header(info: TensorInfo) -> bytes:
    """The header numpy's writer puts before a C-ordered array of `info`'s tensor, so a tensor
    written in row blocks after it makes the same bytes as one written whole."""
    stored = bits_dtype(info.dtype) if info.dtype in EXTENSION_DTYPES else numpy_dtype(info.dtype)
    fields = {"descr": npy.dtype_to_descr(stored), "fortran_order": False, "shape": info.shape}
    buffer = io.BytesIO()
    try:
        npy.write_array_header_1_0(buffer, fields)
    except ValueError:  # too long for version 1.0, as numpy's writer falls back too
        npy.write_array_header_2_0(buffer, fields)
    return buffer.getvalue()


def fortran_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a Fortran-ordered array of `shape`."""
    strides, step = [], 1
    for dim in shape:
        strides.append(step)
        step *= dim
    return tuple(strides)


def member_data_offset(fd: int, member: zipfile.ZipInfo, where: str) -> int | None:
    """Absolute file offset of an uncompressed member's bytes; None if it is compressed."""
    if member.compress_type != zipfile.ZIP_STORED or member.flag_bits & 0x1:
        return None
    raw = os.pread(fd, _LOCAL_HEADER.size, member.header_offset)
    if len(raw) != _LOCAL_HEADER.size:
        raise CheckpointError(f"{where}: zip local header is truncated")
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(raw)
    if signature != _LOCAL_SIGNATURE:
        raise CheckpointError(f"{where}: zip local header is corrupt")
    return int(member.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
