"""Data types of the IR: their names, widths and numpy equivalents, with the IR's errors.

Dtypes are plain strings in Relax's spelling ("float32", "bfloat16", "int4", ...), and GGML's
block types ("q8_0", "q4_k", ...; see `lazyparams.block_types`), held in memory as uint8 blocks.
The table itself is `lazyparams.dtypes`, which the checkpoint formats read too.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lazyparams.block_types import BLOCK_TYPES, BlockType
from lazyparams.dtypes import ALIASES, ELEMENT_TYPES, name_of, numpy_type
from lazyparams.errors import StructInfoError

if TYPE_CHECKING:
    import numpy as np


def is_integer(value: object) -> bool:
    """Whether `value` is a Python or numpy integer (bools are not). numpy is not imported for
    it: a numpy value can exist only once numpy has been."""
    if isinstance(value, int):
        return not isinstance(value, bool)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.integer)


DTYPES: tuple[str, ...] = (*ELEMENT_TYPES, *BLOCK_TYPES)
"""Every dtype name the IR accepts: element types first, then the block types."""


def canonical_dtype(name: str) -> str:
    """Return the canonical spelling of a dtype name, or raise naming the unknown dtype."""
    name = ALIASES.get(name, name)
    if name not in ELEMENT_TYPES and name not in BLOCK_TYPES:
        raise StructInfoError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return name


def is_dtype(name: object) -> bool:
    """True if `name` is a dtype name the IR accepts (aliases included)."""
    return isinstance(name, str) and (
        ALIASES.get(name, name) in ELEMENT_TYPES or name in BLOCK_TYPES
    )


def is_block(dtype: object) -> bool:
    """True for GGML's block types ("q8_0", "q4_k", ...)."""
    return isinstance(dtype, str) and dtype in BLOCK_TYPES


def block_type(dtype: str) -> BlockType:
    """The block type named `dtype`, or raise naming it and the block types there are."""
    found = BLOCK_TYPES.get(dtype)
    if found is None:
        raise StructInfoError(
            f"{dtype!r} is not a block type; expected one of {', '.join(BLOCK_TYPES)}"
        )
    return found


def bits(dtype: str) -> int:
    """Width of one element in bits (block types have none: their elements share bytes)."""
    name = canonical_dtype(dtype)
    if name in BLOCK_TYPES:
        raise StructInfoError(f"block type {name} has no per-element width; expected its nbytes")
    return ELEMENT_TYPES[name].bits


def itemsize(dtype: str) -> int:
    """Bytes one element occupies in memory (int4 and bool occupy a whole byte each)."""
    return max(bits(dtype) // 8, 1)


def nbytes(dtype: str, shape: Sequence[int]) -> int:
    """Bytes a tensor of `dtype` and logical `shape` occupies in memory; exact for block
    types, whose rows are whole blocks (a partial block still takes a whole one)."""
    count = math.prod(shape)
    block = BLOCK_TYPES.get(dtype)
    if block is None:
        return count * itemsize(dtype)
    return -(-count // block.block_size) * block.type_size


def is_float(dtype: str) -> bool:
    """True for the floating-point dtypes (float8 and bfloat16 included)."""
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    """True for the signed and unsigned integer dtypes (bool excluded)."""
    return dtype.startswith(("int", "uint"))


def to_numpy(dtype: str) -> np.dtype[np.generic]:
    """The numpy dtype that holds values of `dtype` in memory (uint8 for block types)."""
    name = canonical_dtype(dtype)
    found = numpy_type("uint8" if name in BLOCK_TYPES else name)
    assert found is not None  # every element dtype has a numpy type
    return found


def storage_shape(dtype: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the array holding a tensor of `dtype` and logical `shape`: the shape
    itself, or for a block type its rows of block bytes."""
    block = BLOCK_TYPES.get(dtype)
    return shape if block is None or not shape else block.storage_shape(shape)


def from_numpy(dtype: np.dtype[np.generic] | type) -> str:
    """The IR dtype name of a numpy dtype, or raise if the IR has no such dtype."""
    import numpy as np

    np_dtype = np.dtype(dtype)
    name = name_of(np_dtype)
    if name is None:
        raise StructInfoError(
            f"numpy dtype {np_dtype} has no IR equivalent; expected one of {', '.join(DTYPES)}"
        )
    return name
