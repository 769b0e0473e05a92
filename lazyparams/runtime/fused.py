"""The kernel of `R.layout_cast`: parts joined, permuted and cast in one pass over their bytes.

Each part is written, permuted and converted, straight into its slice of one output from the
buffer pool: no joined or permuted intermediate exists. 2-D transposes run the compiled
transpose, which converts in the same pass (as it gathers each tile, or in registers as its
runs go out); a part kept in its layout is cast by
`fast.cast_into`; any other permutation goes through numpy's strided casting copy, which gives
the same bits (a cast is elementwise). Imports numpy, `runtime.fast`, `runtime.native` and
`runtime.pool`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lazyparams.runtime import fast, native
from lazyparams.runtime.pool import BUFFERS

Array = np.ndarray[Any, Any]


def layout_cast(parts: Sequence[Array], axis: int, axes: Sequence[int], dtype: Any) -> Array:
    """`np.concatenate(parts, axis).transpose(axes).astype(dtype)`, bit for bit, with no
    intermediate: each part goes straight into its slice of the output."""
    shape = joined_shape(parts, axis, axes)
    out = BUFFERS.empty(shape, np.dtype(dtype))
    at = list(axes).index(axis)  # where the joined axis lands in the output
    start = 0
    for part in parts:
        index = (slice(None),) * at + (slice(start, start + part.shape[axis]),)
        permute_cast_into(part, axes, out[index], out.nbytes)
        start += part.shape[axis]
    return out


def joined_shape(parts: Sequence[Array], axis: int, axes: Sequence[int]) -> tuple[int, ...]:
    """The output shape, or ValueError naming what disagrees."""
    ndim = parts[0].ndim
    if any(p.ndim != ndim for p in parts):
        raise ValueError(f"expected parts of one rank, got ranks {[p.ndim for p in parts]}")
    if sorted(axes) != list(range(ndim)) or not 0 <= axis < max(ndim, 1):
        raise ValueError(f"expected axis {axis} and a permutation {list(axes)} of {ndim} axes")
    joined = list(parts[0].shape)
    for part in parts[1:]:
        rest = [s for a, s in enumerate(part.shape) if a != axis]
        if rest != [s for a, s in enumerate(joined) if a != axis]:
            raise ValueError(f"expected parts whose dims off axis {axis} agree, got {part.shape}")
        joined[axis] += part.shape[axis]
    return tuple(joined[a] for a in axes)


def permute_cast_into(
    x: Array, axes: Sequence[int], dst: Array, total_bytes: int | None = None
) -> None:
    """Write `x.transpose(axes)` converted to `dst.dtype` into `dst` (a view whose shape is
    the permuted one; its strides may be those of a slice of a larger output, of
    `total_bytes` in all)."""
    perm = list(axes)
    if perm == sorted(perm):
        _cast_blocks(x, dst)
        return
    total = dst.nbytes if total_bytes is None else total_bytes
    if x.ndim == 2 and dst.strides[-1] == dst.itemsize and _transpose_cast(x, dst, total):
        return
    if x.dtype == dst.dtype and dst.flags.c_contiguous:
        fast.permute_dims_into(x, perm, dst)
        return
    with np.errstate(all="ignore"):
        np.copyto(dst, np.transpose(x, perm), casting="unsafe")


def _transpose_cast(x: Array, dst: Array, total: int) -> bool:
    """The compiled transpose, converting as it goes; False where it declines."""
    if x.dtype == dst.dtype:
        fast.transpose_2d(x, dst, total)  # compiled, or numpy's tiles
        return True
    return native.transpose_cast_2d(x, dst, total)


def _cast_blocks(x: Array, dst: Array) -> None:
    """`dst[...] = x` converted, by the fastest cast, over the largest C-contiguous blocks of
    `dst` (a slice along some axis is contiguous below that axis)."""
    if dst.flags.c_contiguous or dst.ndim == 0:
        if x.flags.c_contiguous:
            fast.cast_into(x, dst)
        else:
            _copy(x, dst)
        return
    lead = _contiguous_from(dst)
    if math.prod(dst.shape[lead:]) < fast.CHUNK // 16:
        _copy(x, dst)  # blocks too small for a call each
        return
    for index in np.ndindex(*dst.shape[:lead]):
        fast.cast_into(x[index], dst[index])


def _contiguous_from(dst: Array) -> int:
    """The first axis from which `dst[index]` is C-contiguous for every leading index."""
    for lead in range(dst.ndim):
        if dst[(0,) * lead].flags.c_contiguous:
            return lead
    return dst.ndim


def _copy(x: Array, dst: Array) -> None:
    """numpy's strided casting copy: the bits of `astype`, elementwise."""
    with np.errstate(all="ignore"):
        np.copyto(dst, x, casting="unsafe")
