"""Data types of the IR: their names, widths and numpy equivalents.

Dtypes are plain strings in Relax's spelling ("float32", "bfloat16", "int4", ...), and GGML's
block types ("q8_0", "q4_k", ...; see `lazyparams.block_types`), held in memory as uint8 blocks.
numpy and ml_dtypes supply the in-memory types, each imported on first need: naming, sizing
and planning never need them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lazyparams.block_types import BLOCK_TYPES, BlockType
from lazyparams.errors import StructInfoError

if TYPE_CHECKING:
    import numpy as np

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

# numpy's element types, filled on first need; ml_dtypes' types join them later still, since
# importing ml_dtypes costs more than the rest of the start-up
_NUMPY: dict[str, np.dtype[np.generic]] = {}
_PLAIN = (
    *("float64", "float32", "float16", "int64", "int32", "int16", "int8"),
    *("uint64", "uint32", "uint16", "uint8", "bool"),
)
_EXTENSION = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "int4")


def _plain_types() -> dict[str, np.dtype[np.generic]]:
    """numpy's own dtypes the IR has (numpy imported here, once)."""
    if not _NUMPY:
        import numpy as np

        _NUMPY.update({name: np.dtype(name) for name in _PLAIN})
    return _NUMPY


def _numpy_types() -> dict[str, np.dtype[np.generic]]:
    """Every numpy dtype the IR has, ml_dtypes' ones included (imported here, once)."""
    if _EXTENSION[0] not in _plain_types():
        import ml_dtypes
        import numpy as np

        _NUMPY.update({name: np.dtype(getattr(ml_dtypes, name)) for name in _EXTENSION})
    return _NUMPY


def is_integer(value: object) -> bool:
    """Whether `value` is a Python or numpy integer (bools are not). numpy is not imported for
    it: a numpy value can exist only once numpy has been."""
    if isinstance(value, int):
        return not isinstance(value, bool)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.integer)


_ALIASES = {
    "float8_e4m3": "float8_e4m3fn",
    "e4m3_float8": "float8_e4m3fn",
    "e5m2_float8": "float8_e5m2",
}

DTYPES: tuple[str, ...] = (*_BITS, *BLOCK_TYPES)
"""Every dtype name the IR accepts: element types first, then the block types."""


def canonical_dtype(name: str) -> str:
    """Return the canonical spelling of a dtype name, or raise naming the unknown dtype."""
    name = _ALIASES.get(name, name)
    if name not in _BITS and name not in BLOCK_TYPES:
        raise StructInfoError(f"unknown dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return name


def is_dtype(name: object) -> bool:
    """True if `name` is a dtype name the IR accepts (aliases included)."""
    return isinstance(name, str) and (_ALIASES.get(name, name) in _BITS or name in BLOCK_TYPES)


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
    return _BITS[name]


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
    known = _plain_types()
    if name in BLOCK_TYPES:
        return known["uint8"]
    return known[name] if name in known else _numpy_types()[name]


def storage_shape(dtype: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of the array holding a tensor of `dtype` and logical `shape`: the shape
    itself, or for a block type its rows of block bytes."""
    block = BLOCK_TYPES.get(dtype)
    return shape if block is None or not shape else block.storage_shape(shape)


def from_numpy(dtype: np.dtype[np.generic] | type) -> str:
    """The IR dtype name of a numpy dtype, or raise if the IR has no such dtype."""
    import numpy as np

    np_dtype = np.dtype(dtype)
    known = _plain_types()
    known = known if np_dtype in known.values() else _numpy_types()
    for name, candidate in known.items():
        if candidate == np_dtype:
            return name
    raise StructInfoError(
        f"numpy dtype {np_dtype} has no IR equivalent; expected one of {', '.join(DTYPES)}"
    )
