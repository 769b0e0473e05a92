"""The scale searches of ggml's K-quants in numpy, vectorised across sub-blocks.

Every function takes sub-blocks as columns, an (n, S) float32 array holding S sub-blocks of n
values, and loops over the n values and the candidate scales in Python while each step works on
all S sub-blocks at once. Sums run element by element in ggml's order and every product and
quotient is one float32 operation in ggml's order (no fused multiply-add), so the results are
bit-identical to ggml's reference quantizers. Imports numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
F32 = np.float32

GROUP_MAX_EPS = F32(1e-15)
"""Sub-blocks whose largest magnitude is below this are all zero to ggml."""

_ROUNDER = F32(12582912.0)
"""1.5 * 2**23: adding it to a float32 leaves the rounded integer in the low mantissa bits."""


def nearest_int(v: Array) -> Array:
    """ggml's rounding of float32 to int32: add 1.5 * 2**23 in float32 and read the low 22
    mantissa bits (ties to even; values past 2**22 give what ggml's trick gives, not an error)."""
    bits = (v.astype(F32, copy=False) + _ROUNDER).view(np.int32)
    return (bits & 0x007FFFFF) - 0x00400000


def clamped(v: Array, low: int, high: int) -> Array:
    """nearest_int(v) clamped to [low, high], as float32 (exact: the codes are small)."""
    return np.clip(nearest_int(v), low, high).astype(F32)


def wrap8(v: Array, signed: bool) -> Array:
    """int32 values stored in a C int8_t / uint8_t: the low 8 bits, as int32."""
    low = v & 0xFF
    return ((low ^ 0x80) - 0x80) if signed else low


def seqsum(terms: Array, from_zero: bool = True) -> Array:
    """Sum over axis 0 one element after another, as a C loop `s += t[i]` does (numpy's own
    sums pair terms up and round differently); from_zero starts at 0.0 rather than t[0]."""
    total: Array = terms[0] + F32(0.0) if from_zero else terms[0].copy()
    for row in terms[1:]:
        total += row
    return total


def first_max_abs(values: Array, axis: int) -> tuple[Array, Array]:
    """The value of largest magnitude along `axis` (the first of equals; 0 where none is
    above 0, NaN never wins) and that magnitude, as ggml's `if (fabsf(v) > amax)` loops."""
    mag = np.abs(values)
    mag = np.where(mag > 0, mag, F32(0.0))
    idx = np.expand_dims(np.argmax(mag, axis=axis), axis)
    best = np.take_along_axis(mag, idx, axis).squeeze(axis)
    value = np.take_along_axis(values, idx, axis).squeeze(axis)
    return np.where(best > 0, value, F32(0.0)), best


def positive_max(values: Array, axis: int) -> Array:
    """The largest value above 0 along `axis`, or 0: ggml's `if (v > m) m = v` from m = 0."""
    best: Array = np.where(values > 0, values, F32(0.0)).max(axis=axis)
    return best


def fit_min_scale(
    x: Array, w: Array, nmax: int, rmin: float, rdelta: float, nstep: int, mad: bool
) -> tuple[Array, Array, Array]:
    """ggml's make_qkx2_quants on every column: codes L in [0, nmax] with x ~ scale * L - m,
    searching nstep + 1 scales around nmax / (max - min) for the least weighted error
    (absolute when `mad`, squared otherwise). Returns (L as float32, scale, m)."""
    low = start_low = np.minimum(x.min(axis=0), F32(0.0))
    high = x.max(axis=0)
    span = high - low
    sum_w = seqsum(w, from_zero=False)
    sum_x = seqsum(w * x, from_zero=False)
    iscale = F32(nmax) / span
    scale = F32(1.0) / iscale
    codes = clamped(iscale * (x - low), 0, nmax)
    best = _weighted_error(x, w, codes, scale, low, mad)
    for step in range(nstep + 1):
        # a better fit moves the min, and the next candidates scale from it
        iscale = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (high - low)
        trial = clamped(iscale * (x - low), 0, nmax)
        wl = w * trial
        sum_l, sum_l2, sum_xl = seqsum(wl), seqsum(wl * trial), seqsum(wl * x)
        det = sum_w * sum_l2 - sum_l * sum_l
        t_scale = (sum_w * sum_xl - sum_x * sum_l) / det
        t_min = (sum_l2 * sum_x - sum_l * sum_xl) / det
        clamp_min = t_min > 0
        t_min = np.where(clamp_min, F32(0.0), t_min)
        t_scale = np.where(clamp_min, sum_xl / sum_l2, t_scale)
        error = _weighted_error(x, w, trial, t_scale, t_min, mad)
        better = (det > 0) & (error < best)
        codes = np.where(better, trial, codes)
        best = np.where(better, error, best)
        scale = np.where(better, t_scale, scale)
        low = np.where(better, t_min, low)
    flat = span == 0  # ggml returns before the search
    codes = np.where(flat, F32(0.0), codes)
    return codes, np.where(flat, F32(0.0), scale), -np.where(flat, start_low, low)


def _weighted_error(x: Array, w: Array, codes: Array, scale: Array, low: Array, mad: bool) -> Array:
    """sum of w * |scale * L + low - x| (or its square) in ggml's order."""
    diff = scale * codes + low - x
    return seqsum(w * (np.abs(diff) if mad else diff * diff))


def fit_symmetric(x: Array, nmax: int) -> tuple[Array, Array]:
    """ggml's make_qx_quants with rmse_type 1 and no weights on every column: codes in
    [0, 2 * nmax) around nmax, trying 19 scales near -nmax / max for the best x**2-weighted
    fit. Returns (L as float32, scale)."""
    big, amax = first_max_abs(x, 0)
    w = x * x
    iscale = F32(-nmax) / big
    codes, sumlx, suml2 = _symmetric_sums(x, w, iscale, nmax)
    scale = np.where(suml2 != 0, sumlx / suml2, F32(0.0))
    best = scale * sumlx
    for step in (*range(-9, 0), *range(1, 10)):
        iscale = -(F32(nmax) + F32(0.1) * F32(step)) / big
        trial, sumlx, suml2 = _symmetric_sums(x, w, iscale, nmax)
        take = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        codes = np.where(take, trial, codes)
        scale = np.where(take, sumlx / suml2, scale)
        best = np.where(take, scale * sumlx, best)
    zero = amax < GROUP_MAX_EPS
    return np.where(zero, F32(0.0), codes), np.where(zero, F32(0.0), scale)


def _symmetric_sums(x: Array, w: Array, iscale: Array, nmax: int) -> tuple[Array, Array, Array]:
    """Codes (offset by nmax) at `iscale`, and the sums of w*x*l and w*l*l."""
    level = clamped(iscale * x, -nmax, nmax - 1)
    return level + F32(nmax), seqsum(w * x * level), seqsum(w * level * level)


def fit_q3(x: Array) -> tuple[Array, Array]:
    """ggml's make_q3_quants with do_rmse on every column: codes in [0, 8) from -4 / max,
    then up to five passes moving single codes while the x**2-weighted fit improves. Returns
    (L as float32, scale)."""
    big, amax = first_max_abs(x, 0)
    w = x * x
    levels = clamped((F32(-4.0) / big) * x, -4, 3)
    sumlx, suml2 = seqsum(w * x * levels), seqsum(w * levels * levels)
    for _ in range(5):
        changed = False
        for i in range(x.shape[0]):
            wi, xi, li = w[i], x[i], levels[i]
            slx = sumlx - wi * xi * li
            sl2 = suml2 - wi * li * li
            new = clamped(xi * sl2 / slx, -4, 3)
            slx = slx + wi * xi * new
            sl2 = sl2 + wi * new * new
            gain = slx * slx * suml2 > sumlx * sumlx * sl2
            take = (sumlx - wi * xi * li > 0) & (new != li) & (sl2 > 0) & gain
            levels[i] = np.where(take, new, li)
            sumlx = np.where(take, slx, sumlx)
            suml2 = np.where(take, sl2, suml2)
            changed = changed or bool(take.any())
        if not changed:
            break  # a pass without a change would repeat itself
    zero = amax < GROUP_MAX_EPS
    scale = np.where(suml2 > 0, sumlx / suml2, F32(0.0))
    return np.where(zero, F32(0.0), levels + F32(4.0)), np.where(zero, F32(0.0), scale)
