"""Data types of the IR: their names, widths and numpy equivalents.

Dtypes are plain strings in Relax's spelling ("float32", "bfloat16", "int4", ...). numpy and
ml_dtypes supply the in-memory types; nothing else is imported.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from lazyparams.errors import StructInfoError

_BITS: dict[str, int] = {
    "float64": 64,
    "float32": 32,
    "float16": 16,
    "bfloat16": 16,
    "float8_e4m3fn": 8,
    "float8_e5m2": 8,
    "int64": 64,
    "int32": 32,
    "int16": 16,
    "int8": 8,
    "int4": 4,
    "uint64": 64,
    "uint32": 32,
    "uint16": 16,
    "uint8": 8,
    "bool": 8,
}

_NUMPY: dict[str, np.dtype[np.generic]] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "int4": np.dtype(ml_dtypes.int4),
    "uint64": np.dtype(np.uint64),
    "uint32": np.dtype(np.uint32),
    "uint16": np.dtype(np.uint16),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}

_ALIASES = {
    "float8_e4m3": "float8_e4m3fn",
    "e4m3_float8": "float8_e4m3fn",
    "e5m2_float8": "float8_e5m2",
}

DTYPES: tuple[str, ...] = tuple(_BITS)
"""Every dtype name the IR accepts."""


def canonical_dtype(name: str) -> str:
    """Return the canonical spelling of a dtype name, or raise naming the unknown dtype."""
    name = _ALIASES.get(name, name)
    if name not in _BITS:
        raise StructInfoError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return name


def is_dtype(name: object) -> bool:
    """True if `name` is a dtype name the IR accepts (aliases included)."""
    return isinstance(name, str) and _ALIASES.get(name, name) in _BITS


def bits(dtype: str) -> int:
    """Width of one element in bits."""
    return _BITS[canonical_dtype(dtype)]


def itemsize(dtype: str) -> int:
    """Bytes one element occupies in memory (int4 and bool occupy a whole byte each)."""
    return max(bits(dtype) // 8, 1)


def is_float(dtype: str) -> bool:
    """True for the floating-point dtypes (float8 and bfloat16 included)."""
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    """True for the signed and unsigned integer dtypes (bool excluded)."""
    return dtype.startswith(("int", "uint"))


def to_numpy(dtype: str) -> np.dtype[np.generic]:
    """The numpy dtype that holds values of `dtype` in memory."""
    return _NUMPY[canonical_dtype(dtype)]


def from_numpy(dtype: np.dtype[np.generic] | type) -> str:
    """The IR dtype name of a numpy dtype, or raise if the IR has no such dtype."""
    np_dtype = np.dtype(dtype)
    for name, candidate in _NUMPY.items():
        if candidate == np_dtype:
            return name
    raise StructInfoError(
        f"numpy dtype {np_dtype} has no IR equivalent; expected one of {', '.join(DTYPES)}"
    )
