"""Dtype names as the IR spells them, and their numpy / ml_dtypes counterparts.

Every checkpoint format maps its own dtype codes through this table. GGML's block types
(`lazyparams.block_types`) are dtypes too: held as uint8 rows of blocks, sized exactly. Imports
numpy and ml_dtypes, each on first need: listing and planning a checkpoint need only widths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.errors import CheckpointError

if TYPE_CHECKING:
    import numpy as np

# The IR's dtype names first; the unsigned widths after them exist only so that files holding
# such tensors can still be listed and copied.
DTYPE_NAMES: tuple[str, ...] = (
    *("float32", "float16", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"),
    *("int8", "int16", "int32", "int64", "uint8", "bool", "uint16", "uint32", "uint64"),
)
"""The element dtypes (a numpy dtype each); the block types are `BLOCK_TYPES`' keys."""

# dtypes that numpy's own .npy header cannot spell; they are stored as unsigned bits of equal width
EXTENSION_DTYPES = frozenset({"bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"})
# ml_dtypes supplies them, imported on first need only: its import costs more than the rest of
# the start-up, and listing and planning a checkpoint need no more than their widths
_EXTENSION_ITEMSIZE = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int4": 1}
_ITEMSIZE = {
    **dict.fromkeys(("float64", "int64", "uint64"), 8),
    **dict.fromkeys(("float32", "int32", "uint32"), 4),
    **dict.fromkeys(("float16", "int16", "uint16"), 2),
    **dict.fromkeys(("int8", "uint8", "bool"), 1),
    **_EXTENSION_ITEMSIZE,
}

# numpy's own dtypes, filled (numpy imported) on first need
_DTYPES: dict[str, np.dtype[np.generic]] = {}
_NAMES: dict[np.dtype[np.generic], str] = {}


def _load_plain_dtypes() -> None:
    """Fill the tables with numpy's own dtypes (importing numpy, once)."""
    if not _DTYPES:
        import numpy as np

        for name in DTYPE_NAMES:
            if name not in EXTENSION_DTYPES:
                _DTYPES[name] = np.dtype(name)
                _NAMES[_DTYPES[name]] = name


def _load_extension_dtypes() -> None:
    """Add ml_dtypes' types to the tables (importing ml_dtypes, once)."""
    _load_plain_dtypes()
    if "bfloat16" not in _DTYPES:
        import ml_dtypes
        import numpy as np

        for name in sorted(EXTENSION_DTYPES):
            _DTYPES[name] = np.dtype(getattr(ml_dtypes, name))
            _NAMES[_DTYPES[name]] = name


def numpy_dtype(name: str) -> np.dtype[np.generic]:
    """The numpy dtype holding an IR dtype name (uint8 for block types); CheckpointError if
    the name is unknown."""
    _load_plain_dtypes()
    if name in BLOCK_TYPES:
        return _DTYPES["uint8"]
    if name in EXTENSION_DTYPES:
        _load_extension_dtypes()
    try:
        return _DTYPES[name]
    except KeyError:
        raise CheckpointError(
            f"unknown dtype {name!r}; expected one of {', '.join(DTYPE_NAMES)}"
        ) from None


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
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    _load_plain_dtypes()
    if native not in _NAMES:
        _load_extension_dtypes()
    return _NAMES.get(native)


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
    return _ITEMSIZE.get(name) or numpy_dtype(name).itemsize
