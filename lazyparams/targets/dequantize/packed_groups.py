"""compressed-tensors' pack-quantized weights (`io.prequantized.PackedGroups`): which tensors
make each weight, checked against one another, and the traced dequantization.

A linear layer `X` is stored as `X.weight_packed` (int32 [out, in / f], f = 32 / bits fields
per word along the input axis), `X.weight_scale` ([out, in / group]), `X.weight_shape` (the
unpacked shape, [out, in]) and, asymmetric, `X.weight_zero_point` (int32 [out / f, in / group],
fields along the output axis). The dequantized `X.weight` is [out, in] float32:

    weight[j, i] = float32(q[j, i] - offset[j, i // group]) * float32(scale[j, i // group])

with the offset 2**(bits - 1) for symmetric weights, else the zero point: llama.cpp's
converter's product. The unpacked width is the packed one times f (a shape that is not, such
as an input width padded to whole words, is refused where the scales show it); the weights
and scales run in blocks of rows, the zero points are read whole and cut per block. The
dequantized weights come after every other tensor, as the converter appends them. Imports the
io layer and the frontend's ops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.prequantized import PackedGroups
from lazyparams.targets.dequantize.gptq import (
    DEQUANTIZED,
    SCALE_DTYPES,
    LayerDequantization,
    row_index,
)


@dataclass(frozen=True, slots=True)
class PackedLayer:
    """One layer `prefix`: its widths, and whether it has zero points."""

    prefix: str
    outputs: int
    inputs: int
    zero_point: bool

    def part(self, suffix: str) -> str:
        return self.prefix + suffix


def bind_packed_groups(
    scheme: PackedGroups, infos: Mapping[str, TensorInfo], path: str
) -> LayerDequantization:
    """Every pack-quantized layer of the checkpoint `path`, its tensors found and checked
    against one another: one error naming the tensor for the first that does not fit."""
    packed = {}
    for name in infos:
        if name.endswith(scheme.parts[0]):
            layer = _layer(scheme, infos, name.removesuffix(scheme.parts[0]), path)
            packed[layer.part(".weight")] = layer
    owned = {layer.part(s) for layer in packed.values() for s in (*scheme.parts, scheme.zero_point)}
    for name in infos:
        if name.endswith((*scheme.parts, scheme.zero_point)) and name not in owned:
            raise CheckpointError(
                f"{path}: tensor {name!r} belongs to no packed weight; expected "
                f"{name.rsplit('.', 1)[0] + scheme.parts[0]!r} beside it ({scheme.where})"
            )
    kept = {n: i for n, i in infos.items() if n not in owned and not n.endswith(scheme.dropped)}
    for name, layer in packed.items():
        kept[name] = TensorInfo.of(name, (layer.outputs, layer.inputs), DEQUANTIZED)
    return LayerDequantization(scheme, kept, packed, dequantize)


def _layer(
    scheme: PackedGroups, infos: Mapping[str, TensorInfo], prefix: str, path: str
) -> PackedLayer:
    """The layer `prefix`, its parts' shapes checked: weight_packed [out, in / f] int32,
    weight_scale [out, in / group], weight_shape [2], weight_zero_point [out / f, in / group]."""
    found = {}
    for suffix in scheme.parts:
        info = infos.get(prefix + suffix)
        if info is None:
            raise CheckpointError(
                f"{path}: packed weight {prefix!r} has no tensor {prefix + suffix!r}; expected "
                f"{', '.join(prefix + s for s in scheme.parts)} ({scheme.where})"
            )
        found[suffix] = info
    packed, scale, shape = (found[s] for s in scheme.parts)
    per_word = 32 // scheme.bits
    if packed.dtype != "int32" or len(packed.shape) != 2:
        raise CheckpointError(
            f"{path}: tensor {packed.name!r} is {packed.dtype}{list(packed.shape)}; expected a "
            f"2-d tensor of int32 ({scheme.where})"
        )
    outputs, inputs = packed.shape[0], packed.shape[1] * per_word
    groups = inputs // scheme.group
    if inputs % scheme.group or scale.shape != (outputs, groups) or scale.dtype not in SCALE_DTYPES:
        raise CheckpointError(
            f"{path}: tensor {scale.name!r} is {scale.dtype}{list(scale.shape)}; expected "
            f"[{outputs}, {inputs} / {scheme.group}] of a float type for {packed.name!r} of "
            f"{list(packed.shape)} ({scheme.bits} bits, {per_word} a word; group {scheme.group})"
        )
    if shape.shape != (2,):
        raise CheckpointError(
            f"{path}: tensor {shape.name!r} has shape {list(shape.shape)}; expected [2]"
        )
    zero = infos.get(prefix + scheme.zero_point)
    if zero is not None and (zero.shape != (outputs // per_word, groups) or outputs % per_word):
        raise CheckpointError(
            f"{path}: tensor {zero.name!r} has shape {list(zero.shape)}; expected "
            f"[{outputs} / {per_word}, {groups}] ({scheme.where})"
        )
    return PackedLayer(prefix, outputs, inputs, zero is not None)


def dequantize(params: Mapping[str, Tensor], layer: PackedLayer, scheme: PackedGroups) -> Tensor:
    """The layer's [out, in] float32 weight (see the module docstring)."""
    values = ops.unpack_bits(params[layer.part(".weight_packed")], scheme.bits, 1, "int32")
    columns = group_index(layer.inputs, scheme.group)
    if layer.zero_point:
        words = params[layer.part(".weight_zero_point")]
        zeros = ops.unpack_bits(words, scheme.bits, axis=0, dtype="int32")  # [out, groups]
        rows = ops.take_along_axis(zeros, row_index(layer.outputs), axis=0)
        values = values - ops.take_along_axis(rows, columns, axis=1)
    else:
        values = values - (1 << (scheme.bits - 1))
    scale = params[layer.part(".weight_scale")].astype(DEQUANTIZED)
    return values.astype(DEQUANTIZED) * ops.take_along_axis(scale, columns, axis=1)


@cache
def group_index(inputs: int, group: int) -> np.ndarray[Any, Any]:
    """i // group for each input index i, as a row: the gather that widens per-group values."""
    dtype = np.int16 if inputs // group < 2**15 else np.int32
    index = (np.arange(inputs) // group).astype(dtype).reshape(1, inputs)
    index.flags.writeable = False
    return index
