"""GPTQ weights (`io.prequantized.PackedWeights`): which tensors make each weight, checked
against one another, and the traced dequantization.

A linear layer `X` is stored as `X.qweight` (int32 [in / f, out], f = 32 / bits fields per
word along the input axis), `X.qzeros` (int32 [groups, out / f], fields along the output
axis), `X.scales` ([groups, out]) and `X.g_idx` (int32 [in], each input index's group). The
dequantized `X.weight` is [out, in] float32:

    weight[j, i] = float32(scales[g_idx[i], j]) * float32(q[i, j] - zeros[g_idx[i], j])

(zeros one more than stored in the original format), the product llama.cpp's converter takes,
transposed. It is traced in the output's orientation, so the compiler runs it in blocks of
output rows: the packed words and scales are read by columns, the zero points and g_idx whole
(they are small), each block's zero points cut from them by a gather. The dequantized weights
come after every other tensor, in the order of their `qweight`, as the converter appends them.
Imports the io layer and the frontend's ops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.prequantized import PackedWeights

DEQUANTIZED = "float32"
INT_DTYPES = ("int32", "int64")
SCALE_DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True, slots=True)
class Packed:
    """The tensors of one GPTQ layer `prefix`, and its input and output widths."""

    prefix: str
    inputs: int
    outputs: int

    def part(self, suffix: str) -> str:
        return self.prefix + suffix


@dataclass(frozen=True, slots=True)
class LayerDequantization:
    """A checkpoint's tensors after its packed layers are dequantized (GPTQ's, pack-quantized
    ones): `infos` in the converter's order (the packed parts left out, each layer's `.weight`
    after every other tensor), `packed` the layers by the name of their dequantized weight,
    `dequantize(params, layer, scheme)` the traced weight of one."""

    scheme: Any
    infos: Mapping[str, TensorInfo]
    packed: Mapping[str, Any]
    dequantize: Callable[[Mapping[str, Tensor], Any, Any], Tensor]

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The dequantized model's tensors, traced from the checkpoint's."""
        out = {}
        for name in self.infos:
            layer = self.packed.get(name)
            if layer is None:
                out[name] = params[name]
            else:
                out[name] = self.dequantize(params, layer, self.scheme)
        return out


def bind_gptq(
    scheme: PackedWeights, infos: Mapping[str, TensorInfo], path: str
) -> LayerDequantization:
    """Every GPTQ layer of the checkpoint `path`, its four tensors found and their shapes and
    dtypes checked against one another: one error naming the tensor for the first that is
    missing or does not fit."""
    packed = {}
    for name in infos:
        if name.endswith(".qweight"):
            layer = _layer(scheme, infos, name.removesuffix(".qweight"), path)
            packed[layer.part(".weight")] = layer
    parts = {layer.part(suffix) for layer in packed.values() for suffix in scheme.parts}
    for name in infos:
        if name.endswith(scheme.parts) and name not in parts:
            raise CheckpointError(
                f"{path}: tensor {name!r} belongs to no GPTQ layer; expected "
                f"{name.rsplit('.', 1)[0] + '.qweight'!r} beside it ({scheme.where})"
            )
    kept = {name: info for name, info in infos.items() if name not in parts}
    for name, layer in packed.items():
        if name in kept:
            raise CheckpointError(
                f"{path}: tensor {name!r} is there beside {layer.part('.qweight')!r}; "
                f"expected one or the other ({scheme.where})"
            )
        kept[name] = TensorInfo.of(name, (layer.outputs, layer.inputs), DEQUANTIZED)
    return LayerDequantization(scheme, kept, packed, dequantize)


def _layer(
    scheme: PackedWeights, infos: Mapping[str, TensorInfo], prefix: str, path: str
) -> Packed:
    """The layer `prefix`, its tensors' shapes checked: qweight [in / f, out], g_idx [in],
    scales [groups, out], qzeros [groups, out / f]."""
    found = {}
    for suffix in scheme.parts:
        info = infos.get(prefix + suffix)
        if info is None:
            raise CheckpointError(
                f"{path}: GPTQ layer {prefix!r} has no tensor {prefix + suffix!r}; expected "
                f"{', '.join(prefix + s for s in scheme.parts)} ({scheme.where})"
            )
        found[suffix] = info
    qweight, qzeros, scales, g_idx = (found[s] for s in scheme.parts)
    per_word = 32 // scheme.bits  # fields of an int32 word
    _expect(qweight, 2, ("int32",), path, scheme)
    _expect(qzeros, 2, ("int32",), path, scheme)
    _expect(scales, 2, SCALE_DTYPES, path, scheme)
    _expect(g_idx, 1, INT_DTYPES, path, scheme)
    inputs, outputs = qweight.shape[0] * per_word, qweight.shape[1]
    groups = scales.shape[0]
    wanted = {
        g_idx.name: (inputs,),
        scales.name: (groups, outputs),
        qzeros.name: (groups, -(-outputs // per_word)),
    }
    for info in (g_idx, scales, qzeros):
        if info.shape != wanted[info.name]:
            raise CheckpointError(
                f"{path}: tensor {info.name!r} has shape {list(info.shape)}; expected "
                f"{list(wanted[info.name])} for {qweight.name!r} of shape "
                f"{list(qweight.shape)} ({scheme.bits} bits: {per_word} fields a word)"
            )
    if outputs % per_word:
        raise CheckpointError(
            f"{path}: tensor {qweight.name!r} has {outputs} columns; expected a multiple of "
            f"{per_word} ({scheme.bits}-bit zero points {per_word} to a word)"
        )
    return Packed(prefix, inputs, outputs)


def _expect(
    info: TensorInfo, ndim: int, dtypes: tuple[str, ...], path: str, scheme: PackedWeights
) -> None:
    """Refuse a packed part of the wrong rank or dtype, naming it."""
    if len(info.shape) != ndim or info.dtype not in dtypes:
        raise CheckpointError(
            f"{path}: tensor {info.name!r} is {info.dtype}{list(info.shape)}; expected a "
            f"{ndim}-d tensor of {' or '.join(dtypes)} ({scheme.where})"
        )


def dequantize(params: Mapping[str, Tensor], layer: Packed, scheme: PackedWeights) -> Tensor:
    """The layer's [out, in] float32 weight (see the module docstring)."""
    fields = "int16" if scheme.bits == 8 else "int8"
    words = ops.transpose(params[layer.part(".qweight")])  # [out, in / f], read by columns
    values = ops.unpack_bits(words, scheme.bits, axis=1, dtype=fields)
    zeros = ops.unpack_bits(params[layer.part(".qzeros")], scheme.bits, axis=1, dtype=fields)
    if scheme.offset_zeros:
        zeros = zeros + 1
    rows = ops.take_along_axis(ops.transpose(zeros), row_index(layer.outputs), axis=0)
    group = ops.reshape(params[layer.part(".g_idx")], (1, layer.inputs))
    offsets = ops.take_along_axis(rows, group, axis=1)
    scales = ops.take_along_axis(ops.transpose(params[layer.part(".scales")]), group, axis=1)
    return scales.astype(DEQUANTIZED) * (values - offsets).astype(DEQUANTIZED)


@cache
def row_index(rows: int) -> np.ndarray[Any, Any]:
    """0..rows-1 as a column, the gather that cuts a whole table's rows with each block."""
    dtype = np.int16 if rows < 2**15 else np.int32
    index = np.arange(rows, dtype=dtype).reshape(rows, 1)
    index.flags.writeable = False
    return index
