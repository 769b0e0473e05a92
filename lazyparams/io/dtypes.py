"""Dtype names as the IR spells them, and their numpy / ml_dtypes counterparts.

Every checkpoint format maps its own dtype codes through this table. Imports numpy and ml_dtypes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from lazyparams.errors import CheckpointError

# The IR's dtype names first; the unsigned widths after them exist only so that files holding
# such tensors can still be listed and copied.
_DTYPES: dict[str, np.dtype[np.generic]] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "float64": np.dtype(np.float64),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int4": np.dtype(ml_dtypes.int4),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
}
_NAMES: dict[np.dtype[np.generic], str] = {dtype: name for name, dtype in _DTYPES.items()}

# dtypes that numpy's own .npy header cannot spell; they are stored as unsigned bits of equal width
EXTENSION_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"})

DTYPE_NAMES: tuple[str, ...] = tuple(_DTYPES)


def numpy_dtype(name: str) -> np.dtype[np.generic]:
    """The numpy dtype for an IR dtype name; CheckpointError if the name is unknown."""
    try:
        return _DTYPES[name]
    except KeyError:
        raise CheckpointError(
            f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}"
        ) from None


def dtype_name(dtype: np.dtype[np.generic]) -> str | None:
    """The IR dtype name of a numpy dtype (any byte order), or None when it has none."""
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    return _NAMES.get(native)


def bits_dtype(name: str) -> np.dtype[np.generic]:
    """The unsigned integer dtype of the same width, used to store raw bits of `name`."""
    return np.dtype(f"u{numpy_dtype(name).itemsize}")


def itemsize(name: str) -> int:
    """Bytes per element of `name` in memory (int4 takes one byte per value)."""
    return numpy_dtype(name).itemsize
