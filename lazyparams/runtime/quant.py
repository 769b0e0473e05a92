"""Kernels of the quantization ops, following the op layer's formats exactly.

int8: symmetric per channel along `axis`, scale = max|x| / 127 (1 where the max is 0), values
rounded half to even and clipped to [-127, 127]. int4: groups of `group_size` along each row,
scale = max|x| / 7, values in [-8, 7], packed two a byte (element 2j in the low nibble). The
compiled loops of `runtime.native` do the work where they can read the input (float32, float16,
bfloat16, float8; contiguous; finite). Otherwise, and always for an infinity or NaN, it runs a
cache-sized chunk at a time in float32 with `out=` ufuncs, into the outputs; both paths give
the same bits. Imports `runtime.kernels` (the registry), `runtime.fast` and `runtime.native`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import fast, native
from lazyparams.runtime.kernels import Array, kernel

_F32 = native.F32
_NORMAL = (float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max))

SHORT_ROWS = 128
"""Segments (rows, groups) shorter than this are quantized transposed: numpy pays a call per
row for reductions and broadcasts along short rows, but not along long ones."""


def _require(array: Any, dtype: type[Any] | None, ndim: int | None, what: str) -> Array:
    arr = np.asarray(array)
    if dtype is not None and arr.dtype != np.dtype(dtype):
        raise RuntimeExecError(f"expected {what} of dtype {np.dtype(dtype)}, got {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise RuntimeExecError(f"expected {what} of rank {ndim}, got rank {arr.ndim}")
    return arr


def _channel_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise RuntimeExecError(f"expected axis in [{-ndim}, {ndim}), got {axis}")
    return axis % ndim


def _along(values: Array, axis: int, ndim: int) -> Array:
    """A 1-D per-channel array shaped to broadcast along `axis` of a rank-`ndim` tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return values.reshape(shape)


def _scales(amax: Array, qmax: int) -> Array:
    return np.where(amax == 0, np.float32(1), amax / np.float32(qmax)).astype(np.float32)


class _Scratch:
    """The buffers one quantizer call reuses for every chunk: the float32 input (when x must
    be converted or gathered), the rounded values and the int8 codes."""

    def __init__(self, size: int, dtype: np.dtype[Any]) -> None:
        self.cast = fast.caster(dtype, _F32, size)
        self.input = np.empty(size, _F32)
        self.work = np.empty(size, _F32)
        self.codes = np.empty(size, np.int8)
        self.words = np.empty((2, size // 2), np.uint16)
        self.nibbles = np.empty((2, size // 2), np.uint8)

    def as_f32(self, x: Array) -> Array:
        """`x` itself when it is contiguous float32, else a float32 copy of it."""
        if x.dtype == _F32 and x.flags.c_contiguous:
            return x
        copy = self.input[: x.size].reshape(x.shape)
        self.cast(x, copy)
        return copy


def _abs_max(x: Array, axis: int | tuple[int, ...]) -> Array:
    """max |x| along `axis` without an |x| temporary (NaN wins, as in `np.max`)."""
    high: Array = np.max(x, axis=axis)
    np.maximum(high, -np.min(x, axis=axis), out=high)
    return high


def _round_into(x: Array, scale: Array, work: Array, qmax: int, qmin: int) -> None:
    """rint(x / scale), clipped to [qmin, qmax], into `work` (x's shape; may be x itself).

    The clip is skipped where it cannot change a value: with every scale a normal float,
    scale = fl(max|x| / qmax) is within one rounding of the exact quotient, so |x / scale|
    is at most qmax(1 + 2**-22) and rounds to qmax at most.
    """
    np.divide(x, scale, out=work)
    np.rint(work, out=work)
    if not bool(np.all((scale >= _NORMAL[0]) & (scale <= _NORMAL[1]))):
        np.clip(work, qmin, qmax, out=work)


def _segments_into(part: Array, qmax: int, qmin: int, scratch: _Scratch, codes: Array) -> Array:
    """Quantize each row of the 2-D float32 `part` on its own (scale = max|row| / qmax) into
    the int8 `codes` (part's shape); returns the row scales."""
    if part.shape[1] >= SHORT_ROWS:
        rounded = scratch.work[: part.size].reshape(part.shape)
        s = _round_rows(part, qmax, qmin, rounded)
        np.copyto(codes, rounded, casting="unsafe")
        return s
    columns = scratch.work[: part.size].reshape(part.shape[::-1])
    s = _round_columns(part, qmax, qmin, columns)
    codes_t = scratch.codes[: part.size].reshape(columns.shape)
    np.copyto(codes_t, columns, casting="unsafe")
    np.copyto(codes, codes_t.T)
    return s


def _round_rows(part: Array, qmax: int, qmin: int, rounded: Array) -> Array:
    """Each row of `part` scaled by its own max |x| / qmax and rounded, into `rounded`."""
    s = _scales(_abs_max(part, 1), qmax)
    _round_into(part, s[:, None], rounded, qmax, qmin)
    return s


def _round_columns(part: Array, qmax: int, qmin: int, columns: Array) -> Array:
    """As `_round_rows`, for short rows: the result is transposed into `columns`, so that each
    reduction and broadcast runs along whole rows of it (one numpy call, not one per row)."""
    fast.transpose_2d(part, columns)
    s = _scales(_abs_max(columns, 0), qmax)
    _round_into(columns, s[None, :], columns, qmax, qmin)
    return s


# int8 ----------------------------------------------------------------------------------------


def quantize_int8_into(x: Array, axis: int, q: Array, scale: Array) -> None:
    """Quantize `x` per channel of `axis` into `q` (int8, x's shape) and `scale` (float32,
    `(x.shape[axis],)`), chunk by chunk: one pass over x when whole channels fit a chunk."""
    axis = _channel_axis(axis, x.ndim)
    if q.shape != x.shape or scale.shape != (x.shape[axis],):
        raise RuntimeExecError(
            f"expected outputs of shapes {x.shape} and {(x.shape[axis],)}, "
            f"got {q.shape} and {scale.shape}"
        )
    if x.size == 0:
        scale[...] = 1
        return
    shape3 = (math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1 :]))
    codes = q if q.flags.c_contiguous else np.empty(q.shape, np.int8)  # a view is needed
    x3, q3 = np.ascontiguousarray(x).reshape(shape3), codes.reshape(shape3)
    if not native.quantize_int8(x3, q3, scale):
        with np.errstate(all="ignore"):
            if shape3[0] == 1 and shape3[2] <= fast.CHUNK:
                _int8_rows(x3[0], q3[0], scale)
            else:
                _int8_channels(x3, q3, scale)
    if codes is not q:
        np.copyto(q, codes, casting="unsafe")


def _int8_rows(x2: Array, q2: Array, scale: Array) -> None:
    """One pass when channels are rows: each chunk of whole rows gets its scales, then is
    quantized while it is still in cache."""
    step = max(1, fast.CHUNK // x2.shape[1])
    scratch = _Scratch(min(x2.shape[0], step) * x2.shape[1], x2.dtype)
    for r in fast.chunks(x2.shape[0], step):
        part = scratch.as_f32(x2[r : r + step])
        scale[r : r + step] = _segments_into(part, 127, -127, scratch, q2[r : r + step])


def _int8_channels(x3: Array, q3: Array, scale: Array) -> None:
    """Two passes over an (outer, channels, inner) view: the channels' max |x| over every
    block first, then each block quantized with the finished scales."""
    scratch = _Scratch(min(x3.size, fast.CHUNK), x3.dtype)
    amax = np.zeros(x3.shape[1], _F32)
    for block in _blocks(x3.shape):
        c = block[1]
        np.maximum(amax[c], _abs_max(scratch.as_f32(x3[block]), (0, 2)), out=amax[c])
    scale[...] = _scales(amax, 127)
    for block in _blocks(x3.shape):
        part = scratch.as_f32(x3[block])
        rounded = scratch.work[: part.size].reshape(part.shape)
        _round_into(part, scale[block[1]][None, :, None], rounded, 127, -127)
        np.copyto(q3[block], rounded, casting="unsafe")


def _blocks(shape: tuple[int, ...]) -> Iterator[tuple[slice, slice, slice]]:
    """Index blocks of at most `fast.CHUNK` elements covering an (a, c, b) array."""
    a_len, c_len, b_len = shape
    b_step = min(b_len, fast.CHUNK)
    c_step = min(c_len, max(1, fast.CHUNK // b_step))
    a_step = min(a_len, max(1, fast.CHUNK // (b_step * c_step)))
    for a in fast.chunks(a_len, a_step):
        for c in fast.chunks(c_len, c_step):
            for b in fast.chunks(b_len, b_step):
                yield slice(a, a + a_step), slice(c, c + c_step), slice(b, b + b_step)


@kernel("quantize_int8")
def _quantize_int8(ops: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, Array]:
    x = np.asarray(ops[0])
    if x.ndim == 0:
        raise RuntimeExecError("expected x of rank >= 1, got a scalar")
    axis = _channel_axis(attrs.get("axis", 0), x.ndim)
    q, scale = np.empty(x.shape, np.int8), np.empty(x.shape[axis], _F32)
    quantize_int8_into(x, axis, q, scale)
    return q, scale


@kernel("dequantize_int8")
def _dequantize_int8(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    q = _require(ops[0], np.int8, None, "q")
    scale = _require(ops[1], np.float32, 1, "scale")
    axis = _channel_axis(attrs.get("axis", 0), max(q.ndim, 1))
    if q.ndim == 0 or q.shape[axis] != scale.shape[0]:
        raise RuntimeExecError(
            f"expected {q.shape[axis] if q.ndim else 0} scales (q's dim on axis {axis}), "
            f"got {scale.shape[0]}"
        )
    # the ufunc converts q to float32 a buffer at a time: no full-size float copy of q
    return np.multiply(q, _along(scale, axis, q.ndim), dtype=_F32)


# int4 ----------------------------------------------------------------------------------------


def _check_groups(k: int, group_size: int) -> None:
    if group_size <= 0 or k % group_size or k % 2:
        raise RuntimeExecError(
            f"expected K even and divisible by group_size {group_size}, got K = {k}"
        )


def _int4_blocks(n: int, k: int, group_size: int) -> tuple[int, int]:
    """Rows and columns of the blocks of about `fast.CHUNK` elements that quantize_int4 works
    in; columns split only between whole groups at even offsets (whole groups, whole bytes)."""
    unit = math.lcm(group_size, 2)
    cols = k if k <= fast.CHUNK else max(unit, fast.CHUNK // unit * unit)
    return min(n, max(1, fast.CHUNK // cols)), cols


def quantize_int4_into(x: Array, group_size: int, packed: Array, scale: Array) -> None:
    """Quantize 2-D `x` (N, K) by groups along rows into `packed` (uint8, (N, K // 2)) and
    `scale` (float32, (N, K // group_size)), one cache-sized block at a time."""
    n, k = x.shape
    _check_groups(k, group_size)
    if packed.shape != (n, k // 2) or scale.shape != (n, k // group_size):
        raise RuntimeExecError(
            f"expected outputs of shapes {(n, k // 2)} and {(n, k // group_size)}, "
            f"got {packed.shape} and {scale.shape}"
        )
    if x.size == 0 or native.quantize_int4(x, group_size, packed, scale):
        return
    rows, cols = _int4_blocks(n, k, group_size)
    scratch = _Scratch(rows * cols, x.dtype)
    with np.errstate(all="ignore"):
        for r in fast.chunks(n, rows):
            for c in fast.chunks(k, cols):
                part = scratch.as_f32(x[r : r + rows, c : c + cols])
                out = packed[r : r + rows, c // 2 : c // 2 + part.shape[1] // 2]
                s = _int4_block(part, group_size, scratch, out)
                g = c // group_size
                scale[r : r + part.shape[0], g : g + s.shape[1]] = s


def _int4_block(part: Array, group_size: int, scratch: _Scratch, out: Array) -> Array:
    """Quantize and pack one (rows, columns) block of whole groups into `out`; returns its
    (rows, groups) scales. Short groups of even size are rounded and packed transposed, one
    row per position in the group, and only the packed bytes are transposed back."""
    h, w = part.shape
    groups = part.reshape(-1, group_size)
    if group_size >= SHORT_ROWS or group_size % 2:
        codes = scratch.codes[: part.size].reshape(groups.shape)
        s = _segments_into(groups, 7, -8, scratch, codes)
        _pack_nibbles(codes.reshape(h, w), out, scratch)
        return s.reshape(h, -1)
    columns = scratch.work[: part.size].reshape(group_size, -1)
    s = _round_columns(groups, 7, -8, columns)
    signed = scratch.codes[: part.size].reshape(columns.shape)
    np.copyto(signed, columns, casting="unsafe")
    codes = signed.view(np.uint8)  # the 4-bit two's complement is in the low nibble
    low, high = (b[: part.size // 2].reshape(group_size // 2, -1) for b in scratch.nibbles)
    np.bitwise_and(codes[0::2], 0xF, out=low)  # element 2j: the low nibble
    np.left_shift(codes[1::2], 4, out=high)  # element 2j + 1: the high nibble
    np.bitwise_or(low, high, out=low)
    np.copyto(out.reshape(h, -1, group_size // 2), low.T.reshape(h, -1, group_size // 2))
    return s.reshape(h, -1)


def _pack_nibbles(q: Array, out: Array, scratch: _Scratch) -> None:
    """Pack int8 codes in [-8, 7] two to a byte, element 2j in the low nibble: read as
    little-endian pairs, each 16-bit word holds both codes, and one mask and shift join their
    low nibbles (4-bit two's complement) in its low byte."""
    words = q.view("<u2")
    low, high = (b[: words.size].reshape(words.shape) for b in scratch.words)
    np.bitwise_and(words, 0x0F0F, out=low)
    np.right_shift(low, 4, out=high)
    np.bitwise_or(low, high, out=low)
    np.copyto(out, low, casting="unsafe")  # keeps the low byte


@kernel("quantize_int4")
def _quantize_int4(ops: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, Array]:
    x = _require(ops[0], None, 2, "x")
    group_size = attrs.get("group_size", 32)
    n, k = x.shape
    _check_groups(k, group_size)
    packed, scale = np.empty((n, k // 2), np.uint8), np.empty((n, k // group_size), _F32)
    quantize_int4_into(x, group_size, packed, scale)
    return packed, scale


@kernel("dequantize_int4")
def _dequantize_int4(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    packed = _require(ops[0], np.uint8, 2, "packed")
    scale = _require(ops[1], np.float32, 2, "scale")
    group_size = attrs.get("group_size", 32)
    n, k = packed.shape[0], packed.shape[1] * 2
    _check_groups(k, group_size)
    if scale.shape != (n, k // group_size):
        raise RuntimeExecError(f"expected scale of shape {(n, k // group_size)}, got {scale.shape}")
    q = np.empty((n, k), np.int16)
    q[:, 0::2] = (packed & 0xF).astype(np.int16)
    q[:, 1::2] = (packed >> 4).astype(np.int16)
    q = (q ^ 8) - 8  # sign-extend the 4-bit two's complement
    groups = q.astype(np.float32).reshape(n, k // group_size, group_size)
    return (groups * scale[..., None]).reshape(n, k)
