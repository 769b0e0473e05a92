"""The loops behind the layout and cast kernels: blocked transposes, and casts written straight
into a preallocated output.

Each one runs the compiled loop of `runtime.native` where the extension is built and handles
the dtypes and layout, and otherwise a cache-friendly numpy loop: tiles for transposes, and
chunk by chunk for casts. Every `*_into` function fills an output the caller allocated and uses
only temporaries of at most `CHUNK` elements, so it costs little more than the memory it has to
touch, its extra memory is bounded, and the chunked engine can run it on slices. Both paths
release the GIL and give results bit-identical to numpy's (and ml_dtypes') own casts. Imports
numpy, `runtime.native` and `runtime.pool`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lazyparams.runtime import native
from lazyparams.runtime.pool import BUFFERS

Array = np.ndarray[Any, Any]

CHUNK = 1 << 16
"""Elements per chunk of a chunked loop: its temporaries stay in the L2 cache."""

TILE_BYTES = 2048
"""Bytes of one tile row in a blocked transpose (the contiguous run read from the input)."""

TILE_ROWS = 256
"""Input rows per tile of a blocked transpose (the contiguous run written to the output)."""

ALIASED_TILE_ROWS = 128
"""Input rows per tile when a row stride is a multiple of 2 KiB: such rows share cache sets,
and fewer of them fit in cache at once."""

MIN_TILED = 64 * 64
"""Elements below which a transposed plane is copied by numpy in one call: per-tile overhead
would outweigh what tiling saves."""

_U32 = np.dtype(np.uint32)


def chunks(n: int, step: int) -> range:
    """Start offsets of the chunks of `step` (at least 1) covering `range(n)`."""
    return range(0, n, max(step, 1))


# Transposes ----------------------------------------------------------------------------------


def permute_dims(x: Array, axes: Sequence[int] | None) -> Array:
    """`np.transpose(x, axes)` as a new C-contiguous array, copied tile by tile."""
    axes = _check_axes(axes, x.ndim)
    out = BUFFERS.empty(tuple(x.shape[a] for a in axes), x.dtype)
    permute_dims_into(x, axes, out)
    return out


def permute_dims_into(x: Array, axes: Sequence[int] | None, out: Array) -> None:
    """Write `np.transpose(x, axes)` into `out` (C-contiguous, of the permuted shape)."""
    axes = _check_axes(axes, x.ndim)
    if out.shape != tuple(x.shape[a] for a in axes) or not out.flags.c_contiguous:
        raise ValueError(f"expected a C-contiguous out of the permuted shape, got {out.shape}")
    if not x.flags.c_contiguous:  # merging axes needs C order; numpy's copy handles the rest
        np.copyto(out, np.transpose(x, axes))
        return
    shape, perm = merge_axes(x.shape, axes)
    src, dst = x.reshape(shape), out.reshape(tuple(shape[p] for p in perm))
    last = len(perm) - 1
    if last < 1 or perm[-1] == last:  # rows stay contiguous: a plain strided copy is fast
        np.copyto(dst, np.transpose(src, perm))
        return
    _transpose_planes(src, dst, perm)


def _check_axes(axes: Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    norm = tuple(a % ndim if -ndim <= a < ndim else a for a in axes) if ndim else tuple(axes)
    if sorted(norm) != list(range(ndim)):
        raise ValueError(f"expected a permutation of {ndim} axes, got {tuple(axes)}")
    return norm


def merge_axes(shape: Sequence[int], axes: Sequence[int]) -> tuple[tuple[int, ...], list[int]]:
    """The smallest transpose equal to `axes` on `shape`: size-1 axes dropped and axes that stay
    neighbours merged. Returns the merged input shape and the permutation of its axes."""
    kept = [a for a in axes if shape[a] != 1]
    rank = {a: i for i, a in enumerate(sorted(kept))}
    groups: list[list[int]] = []
    for a in (rank[a] for a in kept):
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    merged = tuple(math.prod(shape[sorted(kept)[a]] for a in groups[g]) for g in order)
    return merged, [order.index(g) for g in range(len(groups))]


def _transpose_planes(src: Array, dst: Array, perm: list[int]) -> None:
    """Copy `src.transpose(perm)` into `dst` one 2-D plane at a time: the input's last axis
    against the axis that becomes the output's last, every other index fixed."""
    last = len(perm) - 1
    inner, outer = perm[-1], perm.index(last)  # input axis made last; output axis of input's last
    others = [p for p in range(len(perm)) if p not in (outer, last)]
    if src.shape[inner] * src.shape[last] < MIN_TILED:
        np.copyto(dst, np.transpose(src, perm))
        return
    for index in np.ndindex(*(dst.shape[p] for p in others)):
        s_index: list[Any] = [slice(None)] * src.ndim
        d_index: list[Any] = [slice(None)] * dst.ndim
        for p, i in zip(others, index, strict=True):
            s_index[perm[p]], d_index[p] = i, i
        transpose_2d(src[tuple(s_index)], dst[tuple(d_index)], dst.nbytes)


def transpose_2d(src: Array, dst: Array, total_bytes: int | None = None) -> None:
    """`dst[j, i] = src[i, j]`: compiled, or by tiles small enough that both sides stay in cache
    (a tile reads `TILE_ROWS` runs of `TILE_BYTES` from `src` and writes as many short runs to
    `dst`). `total_bytes` is the whole output when dst is one plane of it."""
    if native.transpose_2d(src, dst, total_bytes):
        return
    n, m = src.shape
    aliased = src.strides[0] % 2048 == 0 or dst.strides[0] % 2048 == 0
    rows = ALIASED_TILE_ROWS if aliased else TILE_ROWS
    cols = max(1, TILE_BYTES // src.itemsize)
    for i in chunks(n, rows):
        for j in chunks(m, cols):
            np.copyto(dst[j : j + cols, i : i + rows], src[i : i + rows, j : j + cols].T)


# Concatenation -------------------------------------------------------------------------------


def concat(parts: Sequence[Array], axis: int) -> Array:
    """`np.concatenate(parts, axis)` with each part copied straight into its slice of one
    output (from the buffer pool); parts of mixed dtypes or ranks take numpy's own path,
    which promotes or refuses them."""
    first = parts[0]
    if any(p.dtype != first.dtype or p.ndim != first.ndim for p in parts) or first.ndim == 0:
        return np.concatenate(parts, axis=axis)
    axis = axis % first.ndim if -first.ndim <= axis < first.ndim else axis
    rest = [tuple(s for a, s in enumerate(p.shape) if a != axis) for p in parts]
    if not 0 <= axis < first.ndim or any(r != rest[0] for r in rest):
        return np.concatenate(parts, axis=axis)  # numpy names the mismatch
    shape = list(first.shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    out = BUFFERS.empty(shape, first.dtype)
    start = 0
    for part in parts:
        index = (slice(None),) * axis + (slice(start, start + part.shape[axis]),)
        np.copyto(out[index], part)
        start += part.shape[axis]
    return out


# Casts ---------------------------------------------------------------------------------------

Caster = Callable[[Array, Array], None]
ChunkLoop = Callable[..., None]


def cast(x: Array, dtype: np.dtype[Any]) -> Array:
    """`x.astype(dtype)`, bit for bit, through the fastest exact path numpy offers."""
    out = BUFFERS.empty(x.shape, dtype)
    cast_into(x, out)
    return out


def cast_into(x: Array, out: Array) -> None:
    """Write `x` converted to `out.dtype` into `out` (same shape), as `astype` would."""
    if not native.cast(x, out):
        _numpy_caster(x.dtype, out.dtype, x.size)(x, out)


def caster(src: np.dtype[Any], dst: np.dtype[Any], size: int = CHUNK) -> Caster:
    """A function that writes arrays of dtype `src` (of at most `size` elements per chunk)
    converted into arrays of dtype `dst`: the compiled loop where there is one, else a numpy
    loop whose scratch buffers are allocated once, on its first use, so that a caller
    converting chunk after chunk allocates nothing per chunk (and nothing at all when the
    compiled loop does every chunk)."""
    numpy_loop = functools.cache(lambda: _numpy_caster(np.dtype(src), np.dtype(dst), size))

    def run(x: Array, out: Array) -> None:
        if not native.cast(x, out):
            numpy_loop()(x, out)

    return run


def _numpy_caster(src: np.dtype[Any], dst: np.dtype[Any], size: int) -> Caster:
    path = _cast_path(src, dst)
    step = min(CHUNK, max(size, 1))
    if path is None:
        return _numpy_cast
    loop, needs = path
    scratch: list[Array] = [np.empty(step, d) for d in needs]

    def run(x: Array, out: Array) -> None:
        if out.shape != x.shape:
            raise ValueError(f"expected out of shape {x.shape}, got {out.shape}")
        if not (x.flags.c_contiguous and out.flags.c_contiguous):
            _numpy_cast(x, out)
            return
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        with np.errstate(all="ignore"):
            for start in chunks(flat_x.size, step):
                part = flat_x[start : start + step]
                loop(part, flat_out[start : start + step], *(b[: part.size] for b in scratch))

    return run


def _numpy_cast(x: Array, out: Array) -> None:
    if out.shape != x.shape:
        raise ValueError(f"expected out of shape {x.shape}, got {out.shape}")
    with np.errstate(all="ignore"):
        np.copyto(out, x, casting="unsafe")


def _cast_path(src: np.dtype[Any], dst: np.dtype[Any]) -> tuple[ChunkLoop, tuple[type, ...]] | None:
    """The chunk loop for a dtype pair and the scratch it needs per element, or None where
    numpy's own cast is the fast one.

    Sources of one or two bytes go through a table of every bit pattern (numpy's float16 and
    ml_dtypes' float8 casts convert one element at a time in software); float32 to float16 and
    to float8 compute the rounding with integer ufuncs. bfloat16 to float32 is already a shift.
    """
    if src == dst or dst not in native.FLOATS:
        return None
    if src in native.SMALL_FLOATS and not (src == native.BF16 and dst.itemsize >= 4):
        return functools.partial(_lookup, table=native.pattern_table(src, dst)), (np.intp,)
    if src == native.F32 and dst == native.F16:
        return _f32_to_f16, (np.uint32, np.uint32, np.uint32)
    if src == native.F32 and dst in native.FLOAT8:
        loop = functools.partial(_f32_to_small, table=_class_table(dst))
        return loop, (np.uint32, np.uint32, np.intp)
    return None


def _lookup(x: Array, out: Array, index: Array, table: Array) -> None:
    np.copyto(index, x.view(f"u{x.itemsize}"))
    np.take(table, index, out=out, mode="wrap")  # every pattern is in range: wrap never wraps


@functools.cache
def _class_table(dst: np.dtype[Any]) -> Array:
    """The bits of the 8-bit float `dst` for each class of float32 that rounds alike: the top
    16 bits and whether any of the low 16 is set. With at most 3 mantissa bits kept, the
    rounding bit is bit 19 or higher, so the class decides the result; a representative of
    each class is converted by ml_dtypes itself."""
    index = np.arange(1 << 17, dtype=np.uint32)
    representative = ((index >> 1) << 16) | (index & 1)
    with np.errstate(all="ignore"):
        return representative.view(native.F32).astype(dst).view(np.uint8)


def _f32_to_small(
    x: Array, out: Array, sticky: Array, top: Array, index: Array, table: Array
) -> None:
    bits = x.view(_U32)
    np.bitwise_and(bits, 0xFFFF, out=sticky)
    np.minimum(sticky, 1, out=sticky)
    np.right_shift(bits, 15, out=top)
    np.bitwise_or(top, sticky, out=top)  # the low bit of top is bit 15, a sticky bit already
    np.copyto(index, top)
    np.take(table, index, out=out.view(table.dtype), mode="wrap")


_HALF_BIAS = np.uint32(((15 - 127) << 23) + 0xFFF & 0xFFFFFFFF)
_HALF_MIN_NORMAL = 113 << 23  # |x| below 2**-14: a float16 subnormal or zero
_HALF_OVERFLOW = 143 << 23  # |x| from 2**16: infinity, or NaN
_HALF_SUBNORMAL_MAGIC = np.uint32(126 << 23)  # 0.5: adding it rounds |x| to a multiple of 2**-24


def _f32_to_f16(x: Array, out: Array, mag: Array, half: Array, spare: Array) -> None:
    """float32 to float16 rounding half to even: rebias the exponent and add the rounding
    increment (0xFFF plus the kept mantissa's low bit) in one integer add."""
    bits = x.view(_U32)
    np.bitwise_and(bits, 0x7FFFFFFF, out=mag)
    low, high = (int(mag.min()), int(mag.max())) if mag.size else (_HALF_MIN_NORMAL, 0)
    np.right_shift(mag, 13, out=half)
    np.bitwise_and(half, 1, out=half)
    np.add(half, mag, out=half)
    np.add(half, _HALF_BIAS, out=half)
    np.right_shift(half, 13, out=half)
    if low < _HALF_MIN_NORMAL:
        _f16_subnormals(mag, half, spare)
    huge = mag >= _HALF_OVERFLOW if high >= _HALF_OVERFLOW else None
    np.right_shift(bits, 16, out=mag)
    np.bitwise_and(mag, 0x8000, out=mag)
    np.bitwise_or(half, mag, out=half)
    np.copyto(out.view(np.uint16), half, casting="unsafe")
    if huge is not None:  # rare: numpy's own cast says infinity, or which NaN
        out[huge] = x[huge].astype(native.F16)


def _f16_subnormals(mag: Array, half: Array, spare: Array) -> None:
    """Float16 subnormals are multiples of 2**-24: adding 0.5 in float32 rounds to one, half to
    even, and leaves the multiple in the low mantissa bits. Weights hold few values this
    small, so only those are redone unless there are many (zeros)."""
    small = np.flatnonzero(mag < _HALF_MIN_NORMAL)
    if len(small) * 8 < len(mag):
        tiny = mag[small].view(native.F32) + _HALF_SUBNORMAL_MAGIC.view(native.F32)
        half[small] = tiny.view(_U32) - _HALF_SUBNORMAL_MAGIC
        return
    np.add(mag.view(native.F32), _HALF_SUBNORMAL_MAGIC.view(native.F32), out=spare.view(native.F32))
    np.subtract(spare, _HALF_SUBNORMAL_MAGIC, out=spare)
    np.copyto(half, spare, where=mag < _HALF_MIN_NORMAL)
