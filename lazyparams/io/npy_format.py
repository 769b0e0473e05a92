"""The .npy pieces shared by the npz and npy-folder formats: bounded headers, dtype tags.

numpy's .npy header cannot spell ml_dtypes types (bfloat16, float8, int4), so such tensors are
stored as unsigned bits of the same width and tagged with their real dtype: in a zip member's
comment for .npz, in a `dtypes.json` beside the files for a folder. Imports numpy and the io
layer's dtype and bound helpers.
"""

from __future__ import annotations

import io
import math
import struct
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.lib.format as npy

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, TensorInfo
from lazyparams.io.dtypes import EXTENSION_DTYPES, bits_dtype, dtype_name, numpy_dtype
from lazyparams.io.limits import check_shape
from lazyparams.io.npy_header_text import header_problem

DTYPES_FILE = "dtypes.json"
COMMENT_PREFIX = b"lazyparams:dtype="


MAX_HEADER_BYTES = 10000
"""The longest .npy header read (numpy's own reader refuses longer ones by default too)."""
_MAGIC = b"\x93NUMPY"
_LENGTH_FIELDS = {(1, 0): struct.Struct("<H"), (2, 0): struct.Struct("<I")}


@dataclass(frozen=True, slots=True)
class NpyHeader:
    """A parsed .npy header: shape, whether Fortran order, stored dtype, header length."""

    shape: tuple[int, ...]
    fortran: bool
    stored: np.dtype[Any]
    length: int

    @property
    def data_bytes(self) -> int:
        """Bytes of array data the header declares after itself."""
        return math.prod(self.shape) * self.stored.itemsize


def read_npy_header(prefix: Callable[[int], bytes], where: str) -> NpyHeader:
    """Parse the .npy header whose first bytes `prefix(count)` returns (fewer at the end of
    the data), reading no more than `MAX_HEADER_BYTES` past the length field and refusing
    pickled (object) arrays."""
    head = prefix(12)
    version = (head[6], head[7]) if len(head) >= 8 and head.startswith(_MAGIC) else None
    if version is None:
        raise CheckpointError(f"{where}: not a .npy array (no .npy magic bytes)")
    field = _LENGTH_FIELDS.get(version)
    if field is None:
        raise CheckpointError(
            f"{where}: .npy version {version[0]}.{version[1]}; expected 1.0 or 2.0"
        )
    if len(head) < 8 + field.size:
        raise CheckpointError(f"{where}: the .npy header is truncated")
    (length,) = field.unpack_from(head, 8)
    if length > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{where}: .npy header of {length} bytes; expected at most {MAX_HEADER_BYTES}"
        )
    whole = prefix(8 + field.size + length)
    if len(whole) != 8 + field.size + length:
        raise CheckpointError(f"{where}: the .npy header is truncated")
    shape, fortran, stored = _parse_header(whole, version, where)
    if stored.hasobject:
        raise CheckpointError(f"{where}: object arrays need pickle, which is never allowed")
    return NpyHeader(check_shape(shape, where), fortran, stored, len(whole))


def _parse_header(whole: bytes, version: tuple[int, int], where: str) -> tuple[Any, bool, Any]:
    """numpy's parse of a header already read and bounded; where numpy refuses it, our own
    account of what is wrong (numpy's text can carry an ast node's repr)."""
    fp = io.BytesIO(whole[8:])
    read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns of headers written by Python 2
            return read(fp, max_header_size=MAX_HEADER_BYTES)
    except Exception:  # numpy's parse of hostile text fails in many ways (tokenize too)
        start = 8 + _LENGTH_FIELDS[version].size
        reason = header_problem(whole[start:].decode("latin-1"), start)
        raise CheckpointError(f"{where}: not a readable .npy header: {reason}") from None


def check_data_size(header: NpyHeader, available: int, where: str) -> None:
    """Refuse data that is not exactly what the header declares (shorter is a truncated
    array; longer would hide bytes no tensor covers)."""
    if available != header.data_bytes:
        raise CheckpointError(
            f"{where}: {available} bytes of data after the .npy header; expected "
            f"{header.data_bytes} for shape {list(header.shape)} of {header.stored}"
        )


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


def dtype_comment(dtype: str) -> bytes:
    """The npz member comment that tags a dtype numpy cannot spell (empty for the others)."""
    return COMMENT_PREFIX + dtype.encode("ascii") if dtype in EXTENSION_DTYPES else b""


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
