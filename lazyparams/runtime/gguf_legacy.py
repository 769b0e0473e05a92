"""GGML's legacy block types (q4_0, q4_1, q5_0, q5_1, q8_0): quantizers and dequantizers.

Each quantizer takes finite float32 rows (rows, n), n a multiple of 32, and gives the bytes of
ggml's `quantize_row_<type>_ref` bit for bit: the same float32 operations in the same order,
`roundf` rounding half away from zero, `x * (1 / d)`, d (and m) rounded to float16 to nearest
even, and C's float to integer conversion as x86 does it (truncation; NaN, infinities and
values out of int32 range give 0x80000000, whose low byte is 0): that case arises for finite
input, where a block's scale is so small that 1 / d overflows. NaN and infinities are refused
with an error naming their position. The compiled loops of `runtime.native` run where built;
these numpy loops give the same bits. Imports numpy, `runtime.native` and `runtime.gguf_rows`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import native_gguf
from lazyparams.runtime.gguf_rows import check_block_rows, check_float_rows

Array = np.ndarray[Any, Any]
QK = 32
"""Values a block of every legacy type."""

TYPE_SIZE = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34}
"""Bytes a block of each legacy type."""

CHUNK_BLOCKS = 4096
"""Blocks the numpy loops take at a time."""

_F32 = np.float32
_INT32_LIMIT = _F32(2.0**31)


def _c_int(v: Array) -> Array:
    """C's (int) of float32 `v` on x86: truncation, 0x80000000 where it is not representable."""
    ok = np.abs(v) < _INT32_LIMIT  # False for NaN too
    out = np.where(ok, v, _F32(0)).astype(np.int32)
    out[~ok] = np.iinfo(np.int32).min
    return out


def _c_byte(v: Array) -> Array:
    """The low byte of C's (int) of `v`: what an (int8_t) or (uint8_t) conversion stores."""
    return _c_int(v).astype(np.uint8)


def _roundf(v: Array) -> Array:
    """C's roundf: to nearest, ties away from zero. `rint` rounds ties to even; where that
    went toward zero, `v - rint(v)` is exactly 0.5 with v's sign, and a step away is added."""
    rounded = np.rint(v)
    rest = v - rounded
    rounded += (rest == _F32(0.5)) & (v > 0)
    rounded -= (rest == _F32(-0.5)) & (v < 0)
    return rounded


def _inverse(d: Array) -> Array:
    """`d ? 1.0f / d : 0.0f` per block."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d != 0, _F32(1) / np.where(d != 0, d, _F32(1)), _F32(0)).astype(_F32)


def _half_bytes(value: Array) -> Array:
    """float32 values as the two little-endian bytes of their float16 (nearest even)."""
    with np.errstate(over="ignore"):
        return value.astype(np.float16).astype("<f2").view(np.uint8).reshape(-1, 2)


# The numpy quantizers work on blocks as columns, (32, blocks): every numpy call then runs
# along all the blocks at once, not 32 values at a time.


def _signed_max(cols: Array, amax: Array) -> Array:
    """The first value of largest magnitude in each block (+0.0 for an all-zero block)."""
    found = np.zeros(cols.shape[1], _F32)
    for j in range(QK - 1, -1, -1):  # the lowest j wins
        found = np.where(np.abs(cols[j]) == amax, cols[j], found)
    return np.where(amax == 0, _F32(0), found).astype(_F32)


def _first_equal(cols: Array, value: Array) -> Array:
    """Per block the first value equal to `value` (so a zero keeps the sign of the first)."""
    found = value
    for j in range(QK - 1, -1, -1):
        found = np.where(cols[j] == value, cols[j], found)
    return found.astype(_F32)


def _nibbles(codes: Array) -> Array:
    """Codes (32, blocks) packed as ggml does, (blocks, 16): value j in the low nibble, j + 16
    in the high one."""
    return ((codes[:16] & 0x0F) | ((codes[16:] & 0x0F) << 4)).astype(np.uint8).T


def _high_bits(codes: Array) -> Array:
    """The fifth bit of each of 32 codes, as the little-endian uint32 `qh` (bit j = code j)."""
    bits = ((codes >> 4) & 1).astype(np.uint32) << np.arange(QK, dtype=np.uint32)[:, None]
    words: Array = np.bitwise_or.reduce(bits, axis=0)
    return words.astype("<u4").view(np.uint8).reshape(-1, 4)


def _q8_0_blocks(cols: Array) -> Array:
    amax = np.max(np.abs(cols), axis=0)
    d = (amax / _F32(127)).astype(_F32)
    codes = _c_byte(_roundf((cols * _inverse(d)).astype(_F32)))
    return np.concatenate([_half_bytes(d), codes.T], axis=1)


def _symmetric_codes(cols: Array, levels: int) -> tuple[Array, Array]:
    """(d, codes) of q4_0 (levels 16) and q5_0 (levels 32): d = max / -(levels / 2),
    code = min(levels - 1, (int8_t)(x * id + levels / 2 + 0.5))."""
    amax = np.max(np.abs(cols), axis=0)
    d = (_signed_max(cols, amax) / _F32(-(levels // 2))).astype(_F32)
    scaled = (cols * _inverse(d)).astype(_F32)
    shifted = (scaled + _F32(levels // 2 + 0.5)).astype(_F32)
    signed = _c_byte(shifted).view(np.int8).astype(np.int32)
    return d, np.minimum(signed, levels - 1).astype(np.uint8)


def _affine_codes(cols: Array, levels: int) -> tuple[Array, Array, Array]:
    """(d, m, codes) of q4_1 (levels 16) and q5_1 (levels 32): m = min, d = (max - min) /
    (levels - 1), code = (x - min) * id + 0.5 converted (q4_1 also clips at 15)."""
    low = _first_equal(cols, np.min(cols, axis=0))
    high = _first_equal(cols, np.max(cols, axis=0))
    with np.errstate(over="ignore", invalid="ignore"):
        d = ((high - low) / _F32(levels - 1)).astype(_F32)
        scaled = ((cols - low) * _inverse(d)).astype(_F32)
        shifted = (scaled + _F32(0.5)).astype(_F32)
    codes = _c_byte(shifted)
    if levels == 16:
        codes = np.minimum(codes.view(np.int8).astype(np.int32), 15).astype(np.uint8)
    return d, low, codes


def _q4_0_blocks(cols: Array) -> Array:
    d, codes = _symmetric_codes(cols, 16)
    return np.concatenate([_half_bytes(d), _nibbles(codes)], axis=1)


def _q4_1_blocks(cols: Array) -> Array:
    d, m, codes = _affine_codes(cols, 16)
    return np.concatenate([_half_bytes(d), _half_bytes(m), _nibbles(codes)], axis=1)


def _q5_0_blocks(cols: Array) -> Array:
    d, codes = _symmetric_codes(cols, 32)
    return np.concatenate([_half_bytes(d), _high_bits(codes), _nibbles(codes)], axis=1)


def _q5_1_blocks(cols: Array) -> Array:
    d, m, codes = _affine_codes(cols, 32)
    parts = [_half_bytes(d), _half_bytes(m), _high_bits(codes), _nibbles(codes)]
    return np.concatenate(parts, axis=1)


def quantize_rows(type_name: str, x: Array) -> Array:
    """The `type_name` bytes (rows, n / 32 * type size) of the float32 rows `x` (n a multiple
    of 32; RuntimeExecError for anything else, as the k-quants' QUANTIZE)."""
    check_float_rows(x, type_name, QK)
    rows = np.ascontiguousarray(x)
    out = np.empty((rows.shape[0], rows.shape[1] // QK * TYPE_SIZE[type_name]), np.uint8)
    quantize_rows_into(type_name, rows, out)
    return out


def quantize_rows_into(type_name: str, rows: Array, out: Array, offset: int = 0) -> None:
    """Write the `type_name` bytes of the float32 rows `rows` into `out`: the compiled loop
    where it runs, else the numpy one. A NaN or infinity is refused (RuntimeExecError naming
    its flat index, counted from `offset`): ggml's reference has no meaningful bytes for it."""
    found = native_gguf.quantize_legacy(type_name, rows, out)
    if found is None:
        finite = np.isfinite(rows)
        found = -1 if bool(finite.all()) else int(np.flatnonzero(~finite)[0]) // QK
        if found < 0:
            _numpy_rows_into(type_name, rows, out)
    if found >= 0:
        block = rows.reshape(-1, QK)[found]
        at = found * QK + int(np.flatnonzero(~np.isfinite(block))[0])
        raise RuntimeExecError(
            f"expected finite values to quantize to {type_name}, got {rows.reshape(-1)[at]} at "
            f"flat index {offset + at}; NaN and infinity have no GGML block encoding"
        )


def _numpy_rows_into(type_name: str, rows: Array, out: Array) -> None:
    """The numpy quantizer, `CHUNK_BLOCKS` blocks at a time (its temporaries stay small)."""
    blocks_of = _CODECS[type_name][0]
    blocks, dest = rows.reshape(-1, QK), out.reshape(-1, TYPE_SIZE[type_name])
    with np.errstate(invalid="ignore", over="ignore"):
        for first in range(0, blocks.shape[0], CHUNK_BLOCKS):
            cols = np.ascontiguousarray(blocks[first : first + CHUNK_BLOCKS].T)
            dest[first : first + CHUNK_BLOCKS] = blocks_of(cols)


# Dequantizers: bytes (rows, n / 32 * type size) -> float32 (rows, n) --------------------------


def _halves(raw: Array) -> Array:
    """Two bytes a block (nb, 2) as the float32 value of their little-endian float16, one
    copy per value of the block, (nb, 32): same-shaped operands keep numpy's loops long."""
    scale = np.ascontiguousarray(raw).view("<f2")[:, 0].astype(_F32)
    return np.repeat(scale, QK).reshape(-1, QK)


def _unpack_nibbles(qs: Array) -> Array:
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)


def _unpack_high(qh: Array) -> Array:
    words = np.ascontiguousarray(qh).view("<u4")[:, 0]
    bits = (words[None, :] >> np.arange(QK, dtype=np.uint32)[:, None]) & 1  # along the blocks
    return np.ascontiguousarray(bits.T).astype(np.int32) << 4


def _q8_0_values(b: Array) -> Array:
    return _halves(b[:, :2]) * b[:, 2:].view(np.int8).astype(_F32)


def _q4_0_values(b: Array) -> Array:
    return _halves(b[:, :2]) * (_unpack_nibbles(b[:, 2:]) - 8).astype(_F32)


def _q4_1_values(b: Array) -> Array:
    return _halves(b[:, :2]) * _unpack_nibbles(b[:, 4:]).astype(_F32) + _halves(b[:, 2:4])


def _q5_0_values(b: Array) -> Array:
    codes = _unpack_nibbles(b[:, 6:]) | _unpack_high(b[:, 2:6])
    return _halves(b[:, :2]) * (codes - 16).astype(_F32)


def _q5_1_values(b: Array) -> Array:
    codes = _unpack_nibbles(b[:, 8:]) | _unpack_high(b[:, 4:8])
    return _halves(b[:, :2]) * codes.astype(_F32) + _halves(b[:, 2:4])


def dequantize_rows(type_name: str, q: Array, n: int) -> Array:
    """The float32 rows (rows, n) the `type_name` bytes `q` (uint8 rows, n / 32 * size) stand
    for (RuntimeExecError for anything else, as the k-quants' DEQUANTIZE)."""
    values_of, size = _CODECS[type_name][1], TYPE_SIZE[type_name]
    check_block_rows(q, n, type_name, QK, size)
    blocks = np.ascontiguousarray(q).reshape(-1, size)
    out = np.empty((q.shape[0], n), _F32)
    if native_gguf.dequantize_legacy(type_name, blocks, out):
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        out[...] = values_of(blocks).reshape(out.shape)
    return out


_CODECS: dict[str, tuple[Callable[[Array], Array], Callable[[Array], Array]]] = {
    "q4_0": (_q4_0_blocks, _q4_0_values),
    "q4_1": (_q4_1_blocks, _q4_1_values),
    "q5_0": (_q5_0_blocks, _q5_0_values),
    "q5_1": (_q5_1_blocks, _q5_1_values),
    "q8_0": (_q8_0_blocks, _q8_0_values),
}
"""Each legacy type's numpy quantizer (float32 columns -> blocks) and dequantizer."""

TYPES: tuple[str, ...] = tuple(TYPE_SIZE)
"""The legacy block types this module quantizes and dequantizes."""
