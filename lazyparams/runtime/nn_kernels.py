"""numpy kernels of the `R.nn` ops: conv2d (NCHW data, OIHW kernel, groups, strides, dilation).

A direct evaluation for checking lifted model functions, not a fast convolution: each output
is a tensordot of the kernel with a strided window view of the padded input. Imports numpy and
the runtime's kernel registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.ir.dtype import to_numpy
from lazyparams.runtime.kernels import Array, kernel


@kernel("nn.conv2d")
def _conv2d(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    data, weight = np.asarray(ops[0]), np.asarray(ops[1])
    out_dtype = to_numpy(attrs["out_dtype"]) if attrs.get("out_dtype") else data.dtype
    work = np.float64 if data.dtype.kind == "f" else np.int64
    top, left, bottom, right = attrs["padding"]
    padded = np.pad(data.astype(work), ((0, 0), (0, 0), (top, bottom), (left, right)))
    groups = int(attrs["groups"])
    per_group = weight.shape[0] // groups
    parts = [
        _group(padded, weight[g * per_group : (g + 1) * per_group].astype(work), g, attrs)
        for g in range(groups)
    ]
    return np.concatenate(parts, axis=1).astype(out_dtype)


def _group(padded: Array, weight: Array, group: int, attrs: Mapping[str, Any]) -> Array:
    """One group's output channels: (N, O/groups, H', W')."""
    channels = weight.shape[1]
    data = padded[:, group * channels : (group + 1) * channels]
    (sh, sw), (dh, dw) = attrs["strides"], attrs["dilation"]
    kh, kw = weight.shape[2:]
    span_h, span_w = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    windows = np.lib.stride_tricks.sliding_window_view(data, (span_h, span_w), axis=(2, 3))
    windows = windows[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, H', W', KH, KW)
    return np.asarray(np.einsum("nchwij,ocij->nohw", windows, weight))
