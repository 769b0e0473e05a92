"""Dtype names as the IR spells them, and their numpy / ml_dtypes counterparts.

Every checkpoint format maps its own dtype codes through this table. GGML's block types
(`lazyparams.block_types`) are dtypes too: held as uint8 rows of blocks, sized exactly. Imports
numpy and ml_dtypes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from lazyparams.block_types import BLOCK_TYPES
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
"""The element dtypes (a numpy dtype each); the block types are `BLOCK_TYPES`' keys."""


def numpy_dtype(name: str) -> np.dtype[np.generic]:
    """The numpy dtype holding an IR dtype name (uint8 for block types); CheckpointError if
    the name is unknown."""
    if name in BLOCK_TYPES:
        return _DTYPES["uint8"]
    try:
        return _DTYPES[name]
    except KeyError:
        raise CheckpointError(
            f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}"
        ) from None


def holds(dtype: np.dtype[np.generic], name: str) -> bool:
    """Whether arrays of numpy `dtype` (any byte order) hold tensors of dtype `name`."""
    return dtype == np.uint8 if name in BLOCK_TYPES else dtype_name(dtype) == name


def is_block(name: str) -> bool:
    """Whether `name` is one of GGML's block types."""
    return name in BLOCK_TYPES


def storage_shape(name: str, shape: Sequence[int]) -> tuple[int, ...]:
    """The shape of the array holding a tensor of dtype `name` and logical `shape`: the same,
    or for a block type its rows of block bytes (the last dim a whole number of blocks)."""
    block = BLOCK_TYPES.get(name)
    dims = tuple(int(d) for d in shape)
    if block is None:
        return dims
    if not dims or dims[-1] % block.block_size:
        raise CheckpointError(
            f"a {name} tensor needs a last dim that is a multiple of {block.block_size}, "
            f"got shape {list(dims)}"
        )
    return block.storage_shape(dims)


def tensor_nbytes(name: str, shape: Sequence[int]) -> int:
    """Bytes of a tensor of dtype `name` and logical `shape` (exact for block types)."""
    return math.prod(storage_shape(name, shape)) * numpy_dtype(name).itemsize


def dtype_name(dtype: np.dtype[np.generic]) -> str | None:
    """The IR dtype name of a numpy dtype (any byte order), or None when it has none."""
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    return _NAMES.get(native)


def bits_dtype(name: str) -> np.dtype[np.generic]:
    """The unsigned integer dtype of the same width, used to store raw bits of `name`."""
    return np.dtype(f"u{numpy_dtype(name).itemsize}")


def itemsize(name: str) -> int:
    """Bytes per element of `name` in memory (int4 takes one byte per value; a block type's
    elements share bytes, so its tensors are sized by `tensor_nbytes`)."""
    if name in BLOCK_TYPES:
        raise CheckpointError(f"block type {name} has no per-element size; expected whole rows")
    return numpy_dtype(name).itemsize
