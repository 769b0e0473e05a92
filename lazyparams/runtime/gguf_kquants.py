"""ggml's K-quant block types (q2_k to q6_k) without an importance matrix: quantizers that write
the bytes of ggml's reference quantizers and dequantizers that read them, bit for bit.

`QUANTIZE[type](x)` takes float32 rows (rows, n), n a multiple of 256, and returns uint8 rows of
ggml's block_qK_K structs; `DEQUANTIZE[type](q, n)` turns them back into float32 (rows, n). The
compiled loops (runtime/native.py) do the work where built; the numpy code here gives the same
bits. Infinities and NaNs are refused. Imports numpy and runtime.native / runtime.gguf_ksearch /
runtime.gguf_rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import native_gguf
from lazyparams.runtime.gguf_ksearch import (
    F32,
    GROUP_MAX_EPS,
    first_max_abs,
    fit_min_scale,
    fit_q3,
    fit_symmetric,
    nearest_int,
    positive_max,
    seqsum,
    wrap8,
)
from lazyparams.runtime.gguf_rows import check_block_rows, check_float_rows

Array = np.ndarray[Any, Any]
QK = 256
"""Values in one super-block."""

TYPE_SIZE = {"q2_k": 84, "q3_k": 110, "q4_k": 144, "q5_k": 176, "q6_k": 210}
"""Bytes of one super-block of each type (sizeof(block_qK_K) in ggml)."""


def _half(v: Array) -> Array:
    """float32 to ggml_fp16_t bits (round to nearest even, as GGML_FP32_TO_FP16)."""
    return np.asarray(v, F32).astype(np.float16).view(np.uint16)


def _unhalf(bits: Array) -> Array:
    """ggml_fp16_t bits to float32 (exact)."""
    return np.ascontiguousarray(bits).view(np.float16).astype(F32)


def _columns(blocks: Array, size: int) -> Array:
    """The (B, 256) super-blocks as (size, B * 256 // size) sub-block columns."""
    return np.ascontiguousarray(blocks.reshape(-1, size).T)


def _rows(columns: Array, blocks: int) -> Array:
    """Sub-block columns back to (B, 256) int32 codes."""
    return columns.T.reshape(blocks, QK).astype(np.int32)


def _requantize(x: Array, codes: Array, d: Array, offset: Array | None, lo: int, hi: int) -> Array:
    """ggml's last pass: codes from the stored scales, round((x + offset) / d) clamped, kept
    from the search where d is 0. x, codes (B, subs, size); d, offset (B, subs)."""
    d3 = d[..., None]
    shifted = x if offset is None else x + offset[..., None]
    fresh = np.clip(nearest_int(shifted / d3), lo, hi)
    return np.where(d3 != 0, fresh, codes)


# Quantizers ----------------------------------------------------------------------------------


def _q2_k(blocks: Array) -> Array:
    """block_q2_K: 16 sub-blocks of 16, 2-bit codes with 4-bit scales and mins."""
    nb = blocks.shape[0]
    cols = _columns(blocks, 16)
    codes, scales, mins = fit_min_scale(cols, np.abs(cols), 3, -0.5, 0.1, 15, True)
    scales, mins = scales.reshape(nb, 16), mins.reshape(nb, 16)
    max_scale, max_min = positive_max(scales, 1), positive_max(mins, 1)
    has_scale, has_min = (max_scale > 0)[:, None], (max_min > 0)[:, None]
    ls = np.where(has_scale, nearest_int((F32(15.0) / max_scale)[:, None] * scales), 0)
    lm = np.where(has_min, nearest_int((F32(15.0) / max_min)[:, None] * mins), 0)
    packed = (ls & 0xFF) | ((lm << 4) & 0xFF)
    d16 = _half(np.where(has_scale[:, 0], max_scale / F32(15.0), F32(0.0)))
    dmin16 = _half(np.where(has_min[:, 0], max_min / F32(15.0), F32(0.0)))
    d = _unhalf(d16)[:, None] * (packed & 0xF).astype(F32)
    dm = _unhalf(dmin16)[:, None] * (packed >> 4).astype(F32)
    sub = blocks.reshape(nb, 16, 16)
    final = _requantize(sub, _rows(codes, nb).reshape(nb, 16, 16), d, dm, 0, 3)
    out = np.empty((nb, TYPE_SIZE["q2_k"]), np.uint8)
    out[:, :16] = packed
    out[:, 16:80] = _pack2(final.reshape(nb, QK))
    out[:, 80:84] = np.stack([d16, dmin16], 1).view(np.uint8)
    return out


def _pack2(codes: Array) -> Array:
    """2-bit codes of (B, 256) as ggml packs them: byte l of each 128 holds l, l+32, l+64, l+96."""
    c = codes.reshape(-1, 2, 4, 32)
    return _join_bits([c[:, :, k] for k in range(4)], 2).reshape(-1, 64)


def _join_bits(parts: list[Array], width: int) -> Array:
    """parts[0] | parts[1] << width | parts[2] << 2 * width | ..."""
    joined: Array = parts[0].copy()
    for k, part in enumerate(parts[1:], 1):
        joined |= part << (k * width)
    return joined


def _q3_k(blocks: Array) -> Array:
    """block_q3_K: 16 sub-blocks of 16, 3-bit codes with signed 6-bit scales."""
    nb = blocks.shape[0]
    codes, scales = fit_q3(_columns(blocks, 16))
    scales = scales.reshape(nb, 16)
    max_scale, _ = first_max_abs(scales, 1)
    has = (max_scale != 0)[:, None]
    iscale = F32(-32.0) / max_scale
    levels = np.clip(wrap8(nearest_int(iscale[:, None] * scales), True), -32, 31) + 32
    levels = np.where(has, levels, 0)
    d16 = _half(np.where(has[:, 0], F32(1.0) / iscale, F32(0.0)))
    d = _unhalf(d16)[:, None] * (levels - 32).astype(F32)
    sub = blocks.reshape(nb, 16, 16)
    final = _requantize(sub, _rows(codes, nb).reshape(nb, 16, 16) - 4, d, None, -4, 3) + 4
    final = final.reshape(nb, 8, 32)
    out = np.empty((nb, TYPE_SIZE["q3_k"]), np.uint8)
    out[:, :32] = _join_bits([final[:, bit] >> 2 for bit in range(8)], 1)
    out[:, 32:96] = _pack2(final.reshape(nb, QK) & 3)
    out[:, 96:108] = _q3_scales(levels)
    out[:, 108:110] = d16.reshape(nb, 1).view(np.uint8)
    return out


def _q3_scales(levels: Array) -> Array:
    """Sixteen 6-bit scales in 12 bytes: low nibbles of 0-7 then 8-15, high bits in 8-11."""
    packed = np.zeros((levels.shape[0], 12), np.int32)
    packed[:, :8] = (levels[:, :8] & 0xF) | ((levels[:, 8:] & 0xF) << 4)
    high = levels >> 4
    for j in range(16):
        packed[:, 8 + j % 4] |= high[:, j] << (2 * (j // 4))
    return packed


def _q45_blocks(
    blocks: Array, type_name: str, nmax: int, rmin: float, nstep: int
) -> tuple[Array, Array]:
    """The shared part of block_q4_K and block_q5_K: 8 sub-blocks of 32 fitted with a min,
    6-bit scale and min codes. Returns the final codes as (B, 4, 2, 32) pairs of sub-blocks,
    and the output blocks with their 16-byte head (d and dmin bits, packed scales) written."""
    nb = blocks.shape[0]
    cols = _columns(blocks, 32)
    rms = np.sqrt(seqsum(cols * cols) / F32(32.0))
    codes, scales, mins = fit_min_scale(cols, rms + np.abs(cols), nmax, rmin, 0.1, nstep, False)
    scales, mins = scales.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale, max_min = positive_max(scales, 1), positive_max(mins, 1)
    inv_scale = np.where(max_scale > 0, F32(63.0) / max_scale, F32(0.0))
    inv_min = np.where(max_min > 0, F32(63.0) / max_min, F32(0.0))
    ls = np.minimum(wrap8(nearest_int(inv_scale[:, None] * scales), False), 63)
    lm = np.minimum(wrap8(nearest_int(inv_min[:, None] * mins), False), 63)
    d16, dmin16 = _half(max_scale / F32(63.0)), _half(max_min / F32(63.0))
    d = _unhalf(d16)[:, None] * ls.astype(F32)
    dm = _unhalf(dmin16)[:, None] * lm.astype(F32)
    sub = blocks.reshape(nb, 8, 32)
    final = _requantize(sub, _rows(codes, nb).reshape(nb, 8, 32), d, dm, 0, nmax)
    out = np.empty((nb, TYPE_SIZE[type_name]), np.uint8)
    out[:, :4] = np.stack([d16, dmin16], 1).view(np.uint8)
    out[:, 4:16] = _k4_scales(ls, lm)
    return final.reshape(nb, 4, 2, 32), out


def _k4_scales(ls: Array, lm: Array) -> Array:
    """Eight 6-bit scales and mins in 12 bytes (ggml's get_scale_min_k4 layout)."""
    packed = np.empty((ls.shape[0], 12), np.int32)
    packed[:, :4] = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    packed[:, 4:8] = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    packed[:, 8:] = (ls[:, 4:] & 0xF) | ((lm[:, 4:] & 0xF) << 4)
    return packed


def _q4_k(blocks: Array) -> Array:
    """block_q4_K: 8 sub-blocks of 32, 4-bit codes with 6-bit scales and mins."""
    c, out = _q45_blocks(blocks, "q4_k", 15, -1.0, 20)
    out[:, 16:] = (c[:, :, 0] | (c[:, :, 1] << 4)).reshape(-1, 128)
    return out


def _q5_k(blocks: Array) -> Array:
    """block_q5_K: as q4_K with a fifth bit per code in qh."""
    c, out = _q45_blocks(blocks, "q5_k", 31, -0.5, 15)
    out[:, 16:48] = _join_bits([c[:, k // 2, k % 2] >> 4 for k in range(8)], 1)
    low = c & 0xF
    out[:, 48:] = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(-1, 128)
    return out


def _q6_k(blocks: Array) -> Array:
    """block_q6_K: 16 sub-blocks of 16, 6-bit codes with signed 8-bit scales."""
    nb = blocks.shape[0]
    codes, scales = fit_symmetric(_columns(blocks, 16), 32)
    scales = scales.reshape(nb, 16)
    max_scale, max_abs = first_max_abs(scales, 1)
    zero = max_abs < GROUP_MAX_EPS
    iscale = F32(-128.0) / max_scale
    d16 = _half(F32(1.0) / iscale)
    levels = wrap8(np.minimum(nearest_int(iscale[:, None] * scales), 127), True)
    d = _unhalf(d16)[:, None] * levels.astype(F32)
    sub = blocks.reshape(nb, 16, 16)
    final = _requantize(sub, _rows(codes, nb).reshape(nb, 16, 16) - 32, d, None, -32, 31) + 32
    c = final.reshape(nb, 2, 4, 32)
    low, high = c & 0xF, c >> 4
    out = np.empty((nb, TYPE_SIZE["q6_k"]), np.uint8)
    ql = np.stack([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], 2)
    out[:, :128] = ql.reshape(nb, 128)
    out[:, 128:192] = _join_bits([high[:, :, k] for k in range(4)], 2).reshape(nb, 64)
    out[:, 192:208] = levels & 0xFF
    out[:, 208:210] = d16.reshape(nb, 1).view(np.uint8)
    out[zero] = 0
    return out


# Dequantizers --------------------------------------------------------------------------------


def _dq_min_scaled(d: Array, dmin: Array, sc: Array, m: Array, codes: Array) -> Array:
    """(d * sc) * q - (dmin * m) per sub-block, in ggml's order. d, dmin (B,); sc, m (B, subs);
    codes (B, subs, size)."""
    scale = d[:, None] * sc.astype(F32)
    offset = dmin[:, None] * m.astype(F32)
    values: Array = scale[..., None] * codes.astype(F32) - offset[..., None]
    return values


def _unpack2(qs: Array) -> Array:
    """(B, 64) bytes of 2-bit codes to (B, 256) codes (inverse of `_pack2`)."""
    shifts = np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]
    return ((qs.reshape(-1, 2, 1, 32) >> shifts) & 3).reshape(-1, QK)


def _dq2(b: Array) -> Array:
    """block_q2_K to float32 (B, 256)."""
    sc = b[:, :16]
    d, dmin = _unhalf(b[:, 80:82]).ravel(), _unhalf(b[:, 82:84]).ravel()
    codes = _unpack2(b[:, 16:80]).reshape(-1, 16, 16)
    return _dq_min_scaled(d, dmin, sc & 0xF, sc >> 4, codes)


def _dq3(b: Array) -> Array:
    """block_q3_K to float32 (B, 256)."""
    raw = b[:, 96:108].astype(np.int32)
    low = np.concatenate([raw[:, :8] & 0xF, raw[:, :8] >> 4], 1)
    high = np.stack([(raw[:, 8 + j % 4] >> (2 * (j // 4))) & 3 for j in range(16)], 1)
    levels = (low | (high << 4)) - 32
    hbit = (b[:, :32, None] >> np.arange(8, dtype=np.uint8)) & 1
    codes = _unpack2(b[:, 32:96]).astype(np.int32) - 4 * (
        1 - hbit.transpose(0, 2, 1).reshape(-1, QK)
    )
    scale = _unhalf(b[:, 108:110]).ravel()[:, None] * levels.astype(F32)
    values: Array = scale[..., None] * codes.reshape(-1, 16, 16).astype(F32)
    return values


def _k4_levels(b: Array) -> tuple[Array, Array]:
    """The 6-bit scales and mins of block_q4_K / block_q5_K, (B, 8) each."""
    s = b[:, 4:16].astype(np.int32)
    sc = np.concatenate([s[:, :4] & 63, (s[:, 8:] & 0xF) | ((s[:, :4] >> 6) << 4)], 1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:] >> 4) | ((s[:, 4:8] >> 6) << 4)], 1)
    return sc, m


def _dq4(b: Array) -> Array:
    """block_q4_K to float32 (B, 256)."""
    sc, m = _k4_levels(b)
    qs = b[:, 16:].reshape(-1, 4, 1, 32)
    codes = (qs >> np.array([0, 4], np.uint8)[None, None, :, None]) & 0xF
    d, dmin = _unhalf(b[:, 0:2]).ravel(), _unhalf(b[:, 2:4]).ravel()
    return _dq_min_scaled(d, dmin, sc, m, codes.reshape(-1, 8, 32))


def _dq5(b: Array) -> Array:
    """block_q5_K to float32 (B, 256)."""
    sc, m = _k4_levels(b)
    qs = b[:, 48:].reshape(-1, 4, 1, 32)
    low = (qs >> np.array([0, 4], np.uint8)[None, None, :, None]) & 0xF
    hbit = (b[:, None, 16:48] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
    codes = low.reshape(-1, 8, 32) + 16 * hbit
    d, dmin = _unhalf(b[:, 0:2]).ravel(), _unhalf(b[:, 2:4]).ravel()
    return _dq_min_scaled(d, dmin, sc, m, codes)


def _dq6(b: Array) -> Array:
    """block_q6_K to float32 (B, 256)."""
    ql = b[:, :128].reshape(-1, 2, 1, 2, 32)  # chunk, nibble, half, lane
    low = (ql >> np.array([0, 4], np.uint8)[None, None, :, None, None]) & 0xF
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    high = (qh >> np.array([0, 2, 4, 6], np.uint8)[None, None, :, None]) & 3
    codes = (low.reshape(-1, 2, 4, 32) | (high << 4)).astype(np.int32) - 32
    d = _unhalf(b[:, 208:210]).ravel()
    scale = d[:, None] * b[:, 192:208].view(np.int8).astype(F32)
    return scale.reshape(-1, 16, 1) * codes.reshape(-1, 16, 16).astype(F32)


# The public tables ---------------------------------------------------------------------------

_NUMPY_QUANTIZE: dict[str, Callable[[Array], Array]] = {
    "q2_k": _q2_k,
    "q3_k": _q3_k,
    "q4_k": _q4_k,
    "q5_k": _q5_k,
    "q6_k": _q6_k,
}
_NUMPY_DEQUANTIZE: dict[str, Callable[[Array], Array]] = {
    "q2_k": _dq2,
    "q3_k": _dq3,
    "q4_k": _dq4,
    "q5_k": _dq5,
    "q6_k": _dq6,
}


def _check_floats(x: Array, kind: str) -> int:
    """The number of super-blocks of the rows `x` after checking them (float32, 2-D,
    C-contiguous, rows of whole super-blocks, finite)."""
    check_float_rows(x, kind, QK)
    if not x.flags.c_contiguous:
        raise RuntimeExecError(f"{kind} quantization expects C-contiguous rows")
    return x.size // QK


def _refuse_nonfinite(x: Array, kind: str) -> None:
    """ggml quantizes an infinity or NaN into garbage: refuse, naming the first row holding one."""
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        raise RuntimeExecError(f"cannot quantize to {kind}: row {row} holds an infinity or NaN")


CHUNK_BLOCKS = 1024
"""Super-blocks the numpy code takes at a time: its scratch (a few dozen float32 arrays of the
chunk's size) stays a few MiB whatever the tensor's size."""


def _in_chunks(fn: Callable[[Array], Array], blocks: Array, out: Array) -> None:
    """out[i] = fn(blocks[i]) per super-block, CHUNK_BLOCKS at a time. Infinities and NaNs
    met on the way (the searches divide by zero; stored scales may be either) are no error."""
    with np.errstate(all="ignore"):
        for start in range(0, blocks.shape[0], CHUNK_BLOCKS):
            stop = start + CHUNK_BLOCKS
            out[start:stop] = fn(blocks[start:stop]).reshape(out[start:stop].shape)


def _quantizer(kind: str) -> Callable[[Array], Array]:
    """QUANTIZE[kind]: the compiled loop where it runs, else the numpy one."""

    def quantize(x: Array) -> Array:
        blocks = _check_floats(x, kind)
        out = np.empty((x.shape[0], x.shape[1] // QK * TYPE_SIZE[kind]), np.uint8)
        if blocks and not native_gguf.quantize_gguf_k(kind, x, out):
            _refuse_nonfinite(x, kind)
            _in_chunks(_NUMPY_QUANTIZE[kind], x.reshape(blocks, QK), out.reshape(blocks, -1))
        return out

    quantize.__doc__ = (
        f"float32 rows (rows, n) to {kind} blocks, uint8 (rows, n // 256 * {TYPE_SIZE[kind]})."
    )
    return quantize


def _dequantizer(kind: str) -> Callable[[Array, int], Array]:
    """DEQUANTIZE[kind]: the compiled loop where it runs, else the numpy one."""

    def dequantize(q: Array, n: int) -> Array:
        size = TYPE_SIZE[kind]
        check_block_rows(q, n, kind, QK, size)
        q = np.ascontiguousarray(q)
        out = np.empty((q.shape[0], n), F32)
        if out.size and not native_gguf.dequantize_gguf_k(kind, q, out):
            _in_chunks(_NUMPY_DEQUANTIZE[kind], q.reshape(-1, size), out.reshape(-1, QK))
        return out

    dequantize.__doc__ = (
        f"{kind} blocks, uint8 (rows, n // 256 * {TYPE_SIZE[kind]}), to float32 (rows, n)."
    )
    return dequantize


QUANTIZE: dict[str, Callable[[Array], Array]] = {kind: _quantizer(kind) for kind in TYPE_SIZE}
DEQUANTIZE: dict[str, Callable[[Array, int], Array]] = {
    kind: _dequantizer(kind) for kind in TYPE_SIZE
}
