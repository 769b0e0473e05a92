"""Weights stored as narrow numbers times scales (`io.prequantized.ScaledWeights`): which
tensor scales which, checked against the configuration, and the traced dequantization.

A weight `X` is `X.astype(float32) * S`, where `S` is its scale `X + suffix` in float32,
expanded to the weight's shape: per block (index i of an axis reads scale i // block, the last
block cut short where the block does not divide the axis), or broadcast (one per tensor, one
per row). That is llama.cpp's converter's product, dtype and order. The expansion is a gather
by constant indices (`take_along_axis`), so the chunker runs the whole product in blocks of
rows. Imports the io layer and the frontend's ops.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.prequantized import ScaledWeights

FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
DEQUANTIZED = "float32"
"""The dtype of a dequantized weight: the converter's (a SPEC may cast it further)."""


@dataclass(frozen=True, slots=True)
class Scaled:
    """Weight `name` and its scale `scale`, with the block each scale covers (per axis of the
    weight: 1 where the scale has the weight's extent, the whole axis where it broadcasts)."""

    name: str
    scale: str
    blocks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Dequantization:
    """A checkpoint's tensors after dequantization: `infos` in the source's order (scales and
    dropped tensors left out), `scaled` the weights made from a scale."""

    scheme: ScaledWeights
    infos: Mapping[str, TensorInfo]
    scaled: Mapping[str, Scaled]

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The dequantized model's tensors, traced from the checkpoint's."""
        out = {}
        for name in self.infos:
            pair = self.scaled.get(name)
            out[name] = params[name] if pair is None else dequantize(params, pair)
        return out


def bind_scaled(
    scheme: ScaledWeights, infos: Mapping[str, TensorInfo], path: str
) -> Dequantization:
    """Pair every scale of the checkpoint `path` (tensor infos `infos`) with its weight and
    check its shape; a float8 weight without a scale, or a scale without a weight, is an
    error naming the tensor."""
    suffix = scheme.scale_suffix
    scaled: dict[str, Scaled] = {}
    for name, info in infos.items():
        if not name.endswith(suffix) or name.endswith(scheme.dropped) or not scheme.scaled:
            continue
        weight = infos.get(name.removesuffix(suffix))
        if weight is None:
            raise CheckpointError(
                f"{path}: tensor {name!r} scales no tensor; expected "
                f"{name.removesuffix(suffix)!r} beside it ({scheme.where})"
            )
        scaled[weight.name] = Scaled(weight.name, name, _blocks(scheme, weight, info, path))
    hidden = {s.scale for s in scaled.values()}
    kept = {}
    for name, info in infos.items():
        if name in hidden or name.endswith(scheme.dropped):
            continue
        if info.dtype in FLOAT8 and name not in scaled:
            raise CheckpointError(
                f"{path}: tensor {name!r} is {info.dtype} without a scale; expected "
                f"{name + suffix!r} ({scheme.where})"
            )
        kept[name] = TensorInfo.of(name, info.shape, DEQUANTIZED) if name in scaled else info
    return Dequantization(scheme, kept, scaled)


def _blocks(
    scheme: ScaledWeights, weight: TensorInfo, scale: TensorInfo, path: str
) -> tuple[int, ...]:
    """The extent of weight one scale entry covers, per axis; an error naming the scale when
    its shape does not fit the weight."""
    shape = weight.shape
    if scheme.block is not None and len(shape) >= 2:
        lead = (1,) * (len(shape) - 2)
        blocks = (*lead, *scheme.block)
        wanted = tuple(math.ceil(d / b) for d, b in zip(shape, blocks, strict=True))
        if scale.shape == wanted:
            return blocks
        what = f"ceil({list(shape)} / {list(blocks)}) = {list(wanted)}"
    else:
        padded = (*scale.shape, *(1,) * (len(shape) - len(scale.shape)))
        if len(padded) == len(shape) and all(
            s in (1, d) for s, d in zip(padded, shape, strict=True)
        ):
            return tuple(d if s == 1 else 1 for s, d in zip(padded, shape, strict=True))
        what = f"a shape that broadcasts against the weight's {list(shape)}"
    raise CheckpointError(
        f"{path}: tensor {scale.name!r} has shape {list(scale.shape)}; expected {what} "
        f"({scheme.where})"
    )


def dequantize(params: Mapping[str, Tensor], pair: Scaled) -> Tensor:
    """weight.astype(float32) * scale, the scale in float32 expanded to the weight's shape."""
    weight = params[pair.name]
    scale = params[pair.scale].astype(DEQUANTIZED)
    if scale.size == 1:  # one scale for the tensor: it broadcasts, in any block of rows
        return weight.astype(DEQUANTIZED) * scale
    if scale.ndim < weight.ndim:  # one per row, as [rows]: as the converter unsqueezes it
        scale = ops.reshape(scale, (*scale.shape, *(1,) * (weight.ndim - scale.ndim)))
    for axis, (extent, block) in enumerate(zip(weight.shape, pair.blocks, strict=True)):
        if scale.shape[axis] != extent:
            scale = ops.take_along_axis(scale, block_index(weight.ndim, axis, extent, block), axis)
    return weight.astype(DEQUANTIZED) * scale


@cache
def block_index(ndim: int, axis: int, extent: int, block: int) -> np.ndarray[Any, Any]:
    """i // block for each index i < extent of `axis`, shaped to broadcast along the others
    (one array per shape, shared by every weight of that shape)."""
    dtype = np.int16 if extent // block < 2**15 else np.int32
    index = (np.arange(extent) // block).astype(dtype)
    shape = [1] * ndim
    shape[axis] = extent
    index = index.reshape(shape)
    index.flags.writeable = False
    return index
