"""numpy kernels of the quantization ops, following the op layer's formats exactly.

int8: symmetric per channel along `axis`, scale = max|x| / 127 (1 where the max is 0), values
rounded half to even and clipped to [-127, 127]. int4: groups of `group_size` along each row,
scale = max|x| / 7, values in [-8, 7], packed two a byte (element 2j in the low nibble).
Imports `runtime.kernels` (the registry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime.kernels import Array, kernel


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


@kernel("quantize_int8")
def _quantize_int8(ops: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, Array]:
    x = np.asarray(ops[0]).astype(np.float32)
    if x.ndim == 0:
        raise RuntimeExecError("expected x of rank >= 1, got a scalar")
    axis = _channel_axis(attrs.get("axis", 0), x.ndim)
    others = tuple(a for a in range(x.ndim) if a != axis)
    scale = _scales(np.max(np.abs(x), axis=others, initial=0), 127)
    q = np.clip(np.rint(x / _along(scale, axis, x.ndim)), -127, 127).astype(np.int8)
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
    return q.astype(np.float32) * _along(scale, axis, q.ndim)


def _check_groups(k: int, group_size: int) -> None:
    if group_size <= 0 or k % group_size or k % 2:
        raise RuntimeExecError(
            f"expected K even and divisible by group_size {group_size}, got K = {k}"
        )


@kernel("quantize_int4")
def _quantize_int4(ops: Sequence[Any], attrs: Mapping[str, Any]) -> tuple[Array, Array]:
    x = _require(ops[0], None, 2, "x").astype(np.float32)
    group_size = attrs.get("group_size", 32)
    n, k = x.shape
    _check_groups(k, group_size)
    groups = x.reshape(n, k // group_size, group_size)
    scale = _scales(np.max(np.abs(groups), axis=2, initial=0), 7)
    q = np.clip(np.rint(groups / scale[..., None]), -8, 7).astype(np.int8).reshape(n, k)
    nibbles = q.astype(np.uint8) & np.uint8(0xF)  # 4-bit two's complement
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << np.uint8(4)), scale


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
