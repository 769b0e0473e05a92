"""GPTQ checkpoints made with GPTQ's published packing: per group of input rows an asymmetric
scale and zero point, q = clamp(round(w / scale) + zero, 0, 2**bits - 1); q packed along the
input axis into int32 words (field k of a word at bits * k), zero points (less one in the
original format) packed along the output axis; g_idx either plain (i // group) or act-order
(a permutation of the groups). Built on hf_fixtures' models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tests.targets.dequantize.fixtures import quantized_names
from tests.targets.llamacpp.hf_fixtures import SHAPES, config_of, random_weights, write_checkpoint


def pack(fields: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Unsigned `bits`-bit fields packed into int32 words along `axis`, lowest first."""
    per = 32 // bits
    moved = np.moveaxis(fields.astype(np.uint32), axis, -1)
    words = moved.reshape(*moved.shape[:-1], -1, per)
    shifts = np.arange(per, dtype=np.uint32) * bits
    packed = np.bitwise_or.reduce(words << shifts, axis=-1).astype(np.uint32)
    return np.ascontiguousarray(np.moveaxis(packed.view(np.int32), -1, axis))


def gptq_layer(
    w: np.ndarray, bits: int, group: int, act_order: bool, v2: bool, seed: int
) -> dict[str, np.ndarray]:
    """The four tensors of one layer ([out, in] weight `w`) and the ints they encode:
    returns qweight, qzeros, scales (float16), g_idx and, for the checks, `q` [in, out] and
    `zeros` [groups, out] (the zero points themselves)."""
    rng = np.random.default_rng(seed)
    wt = w.astype(np.float32).T  # [in, out]
    inputs = wt.shape[0]
    groups = inputs // group
    g_idx = np.arange(inputs, dtype=np.int32) // group
    if act_order:
        g_idx = rng.permutation(g_idx).astype(np.int32)
    maxq = (1 << bits) - 1
    low = np.stack([wt[g_idx == g].min(axis=0) for g in range(groups)])
    high = np.stack([wt[g_idx == g].max(axis=0) for g in range(groups)])
    scales = np.maximum((high - low) / maxq, 1e-6).astype(np.float16)
    zeros = np.clip(np.rint(-low / scales.astype(np.float32)), 0, maxq).astype(np.int32)
    q = np.rint(wt / scales[g_idx].astype(np.float32)) + zeros[g_idx]
    q = np.clip(q, 0, maxq).astype(np.int32)
    stored = zeros if v2 else zeros - 1  # the original format stores each zero less one
    return {
        "qweight": pack(q, bits, 0),
        "qzeros": pack(stored & maxq, bits, 1),
        "scales": scales,
        "g_idx": g_idx,
        "q": q,
        "zeros": zeros,
    }


def gptq_model(
    folder: Path,
    bits: int = 4,
    *,
    group: int = 32,
    act_order: bool = False,
    v2: bool = False,
    kind: str = "llama",
    **changes: Any,
) -> tuple[Path, dict[str, dict[str, np.ndarray]]]:
    """A GPTQ checkpoint of `kind` (its fixture shape with `changes`) and, per quantized
    weight name, its layer's tensors."""
    shape = replace(SHAPES[kind], **changes)
    weights = random_weights(shape)
    out: dict[str, np.ndarray] = {}
    layers = {}
    for index, (name, w) in enumerate(weights.items()):
        if name not in quantized_names(weights):
            out[name] = w
            continue
        layer = gptq_layer(w, bits, group, act_order, v2, index)
        prefix = name.removesuffix(".weight")
        for part in ("qweight", "qzeros", "scales", "g_idx"):
            out[f"{prefix}.{part}"] = layer[part]
        layers[name] = layer
    config = config_of(shape)
    config["quantization_config"] = gptq_config(bits, group, act_order, v2)
    return write_checkpoint(folder, out, config), layers


def gptq_config(bits: int, group: int, act_order: bool, v2: bool) -> dict[str, Any]:
    """The quantization_config GPTQ tools write."""
    return {
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group,
        "desc_act": act_order,
        "sym": False,
        "checkpoint_format": "gptq_v2" if v2 else "gptq",
        "damp_percent": 0.01,
    }


def pack_quantized_layer(
    w: np.ndarray, bits: int, group: int, symmetric: bool
) -> dict[str, np.ndarray]:
    """compressed-tensors' pack-quantized layer of weight `w` [out, in]: per row and group of
    inputs a scale (symmetric: absmax / (2**(bits-1) - 1); else (max - min) / (2**bits - 1)
    with a zero point), q = clamp(round(w / scale) + offset, 0, 2**bits - 1) stored as fields
    along the input axis, zero points as fields along the output axis. Returns the tensors and,
    for the checks, `q` and `offset` ([out, groups])."""
    w = w.astype(np.float32)
    out, inputs = w.shape
    parts = w.reshape(out, inputs // group, group)
    maxq = (1 << bits) - 1
    if symmetric:
        half = 1 << (bits - 1)
        scale = np.maximum(np.abs(parts).max(axis=2) / (half - 1), 1e-6).astype(np.float16)
        offset = np.full(scale.shape, half, np.int32)
    else:
        low, high = parts.min(axis=2), parts.max(axis=2)
        scale = np.maximum((high - low) / maxq, 1e-6).astype(np.float16)
        offset = np.clip(np.rint(-low / scale.astype(np.float32)), 0, maxq).astype(np.int32)
    q = np.rint(parts / scale.astype(np.float32)[..., None]) + offset[..., None]
    q = np.clip(q, 0, maxq).astype(np.int32).reshape(out, inputs)
    layer = {
        "weight_packed": pack(q, bits, 1),
        "weight_scale": scale,
        "weight_shape": np.array([out, inputs], np.int64),
        "q": q,
        "offset": offset,
    }
    if not symmetric:
        layer["weight_zero_point"] = pack(offset, bits, 0)
    return layer


def pack_quantized_model(
    folder: Path, bits: int = 4, *, group: int = 32, symmetric: bool = True, **changes: Any
) -> tuple[Path, dict[str, dict[str, np.ndarray]]]:
    """A pack-quantized llama checkpoint and, per quantized weight name, its layer's tensors."""
    shape = replace(SHAPES["llama"], **changes)
    weights = random_weights(shape)
    out: dict[str, np.ndarray] = {}
    layers = {}
    for name, w in weights.items():
        if name not in quantized_names(weights):
            out[name] = w
            continue
        layer = pack_quantized_layer(w, bits, group, symmetric)
        for part, value in layer.items():
            if part.startswith("weight_"):
                out[f"{name}_{part.removeprefix('weight_')}"] = value
        layers[name] = layer
    config = config_of(shape)
    scheme = {"num_bits": bits, "type": "int", "symmetric": symmetric, "strategy": "group"}
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": {**scheme, "group_size": group}}
        },
        "ignore": ["lm_head"],
    }
    return write_checkpoint(folder, out, config), layers
