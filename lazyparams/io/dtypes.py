"""Dtype names as the IR spells them, and their numpy / ml_dtypes counterparts, for files.

Every checkpoint format maps its own dtype codes through these names; the table is
`lazyparams.dtypes` (the IR's too), wrapped here in `CheckpointError`s and the layout of block
types in files: uint8 rows of whole blocks, sized exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.dtypes import ELEMENT_TYPES, name_of, numpy_type
from lazyparams.dtypes import EXTENSION_DTYPES as EXTENSION_DTYPES  # numpy's .npy cannot spell
from lazyparams.errors import CheckpointError

if TYPE_CHECKING:
    import numpy as np

DTYPE_NAMES: tuple[str, ...] = tuple(ELEMENT_TYPES)
"""The element dtypes (a numpy dtype each); the block types are `BLOCK_TYPES`' keys."""


def numpy_dtype(name: str) -> np.dtype[np.generic]:
    """The numpy dtype holding an IR dtype name (uint8 for block types); CheckpointError if
    the name is unknown."""
    found = numpy_type("uint8" if name in BLOCK_TYPES else name)
    if found is None:
        raise _unknown(name)
    return found


def holds(dtype: np.dtype[np.generic], name: str) -> bool:
    """Whether arrays of numpy `dtype` (any byte order) hold tensors of dtype `name`."""
    return dtype == "uint8" if name in BLOCK_TYPES else dtype_name(dtype) == name


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
    return math.prod(storage_shape(name, shape)) * _storage_itemsize(name)


def dtype_name(dtype: np.dtype[np.generic]) -> str | None:
    """The IR dtype name of a numpy dtype (any byte order), or None when it has none."""
    return name_of(dtype)


def bits_dtype(name: str) -> np.dtype[np.generic]:
    """The unsigned integer dtype of the same width, used to store raw bits of `name`."""
    import numpy as np

    return np.dtype(f"u{_storage_itemsize(name)}")


def _storage_itemsize(name: str) -> int:
    """Bytes per element of the array holding `name` (1 for a block type's uint8 rows)."""
    return 1 if name in BLOCK_TYPES else itemsize(name)


def itemsize(name: str) -> int:
    """Bytes per element of `name` in memory (int4 takes one byte per value; a block type's
    elements share bytes, so its tensors are sized by `tensor_nbytes`)."""
    if name in BLOCK_TYPES:
        raise CheckpointError(f"block type {name} has no per-element size; expected whole rows")
    element = ELEMENT_TYPES.get(name)
    if element is None:
        raise _unknown(name)
    return element.itemsize


def _unknown(name: str) -> CheckpointError:
    return CheckpointError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}")
