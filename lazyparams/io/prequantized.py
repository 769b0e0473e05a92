"""A Hugging Face folder's `quantization_config`: how its weights are stored as narrow numbers
times scales, read and checked key by key before any tensor is.

Supported: `fp8` (`X.weight` in float8 times `X.weight_scale_inv`, per block of
`weight_block_size` or broadcast per tensor / per channel), `gptq` (packed 2-, 4- and 8-bit
weights with group scales and zero points) and `compressed-tensors` in the
float-, int- and naive-quantized formats (`X.weight` times `X.weight_scale`; channel, tensor,
group and block strategies). Activation settings need nothing: their tensors (input scales) are
dropped. Anything else is one error naming config.json and the supported kinds. What the tensors
mean is `targets.dequantize`'s business. Imports the io layer only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError

KEY = "quantization_config"
SUPPORTED = (
    "fp8 (weight_block_size, or per-tensor scales)",
    "gptq (2, 4 or 8 bits; checkpoint_format gptq or gptq_v2)",
    "compressed-tensors (float-quantized, int-quantized, naive-quantized; channel, tensor, "
    "group or block strategy; pack-quantized int of 4 or 8 bits, group strategy)",
)
"""The kinds a model folder may claim, as errors list them."""
FP8_DROPPED = (".activation_scale", "_activation_scale", ".input_scale")
"""Tensors of an fp8 checkpoint that scale activations, not weights: not part of the model."""
CT_DROPPED = (".input_scale", ".input_zero_point", ".output_scale", ".k_scale", ".v_scale")
"""The activation and KV-cache scales of a compressed-tensors checkpoint."""
CT_FORMATS = ("float-quantized", "int-quantized", "naive-quantized")
CT_STRATEGIES = ("channel", "tensor", "group", "block")


@dataclass(frozen=True, slots=True)
class ScaledWeights:
    """Weights stored as `X` (a narrow type) times `X + scale_suffix` (float).

    `block` is the (rows, columns) extent one scale covers in the last two axes, or None when
    the scale broadcasts against the weight (one per tensor, one per row). `dropped` are the
    name endings of tensors the dequantized model no longer holds. `where` names the
    configuration for errors.
    """

    method: str
    where: str
    scale_suffix: str
    block: tuple[int, int] | None
    dropped: tuple[str, ...]
    scaled: bool = True
    """False for a scheme that quantizes activations only: no weight has a scale."""


@dataclass(frozen=True, slots=True)
class PackedWeights:
    """Weights packed as GPTQ packs them: `X.qweight` (int32 words of `bits`-bit fields along
    the input axis), `X.qzeros` (fields along the output axis), `X.scales` (one row per
    group) and `X.g_idx` (each input index's group). `offset_zeros`: the original format
    stores each zero point less one (gptq_v2 stores it as it is)."""

    method: str
    where: str
    bits: int
    offset_zeros: bool
    parts: tuple[str, ...] = (".qweight", ".qzeros", ".scales", ".g_idx")


@dataclass(frozen=True, slots=True)
class PackedGroups:
    """compressed-tensors' pack-quantized weights: `X.weight_packed` (int32 words of `bits`-bit
    fields along the input axis), `X.weight_scale` (one per row and group of `group` inputs),
    `X.weight_shape` (the unpacked shape) and, asymmetric, `X.weight_zero_point` (fields along
    the output axis). Symmetric weights are offset by 2**(bits - 1)."""

    method: str
    where: str
    bits: int
    group: int
    parts: tuple[str, ...] = (".weight_packed", ".weight_scale", ".weight_shape")
    zero_point: str = ".weight_zero_point"
    dropped: tuple[str, ...] = CT_DROPPED


GPTQ_BITS = (2, 4, 8)
GPTQ_FORMATS = ("gptq", "gptq_v2")


def read_quantization(
    config: Mapping[str, Any], path: Path
) -> ScaledWeights | PackedWeights | PackedGroups | None:
    """The checked `quantization_config` of a config.json at `path`, or None when it has
    none; CheckpointError naming the key for any kind or option not supported."""
    raw = config.get(KEY)
    if raw is None:
        return None
    where = f"{path}: {KEY}"
    if not isinstance(raw, Mapping):
        raise CheckpointError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    method = raw.get("quant_method")
    if method == "fp8":
        return _fp8(raw, where)
    if method == "compressed-tensors":
        return _compressed_tensors(raw, where)
    if method == "gptq":
        return _gptq(raw, where)
    raise CheckpointError(
        f"{where}: quant_method {method!r} is not supported; expected one of: "
        + "; ".join(SUPPORTED)
    )


def _fp8(raw: Mapping[str, Any], where: str) -> ScaledWeights:
    """fp8: `weight_block_size` [rows, columns], or none for scales that broadcast."""
    fmt = raw.get("fmt", "e4m3")
    if fmt not in ("e4m3", "e5m2"):
        raise CheckpointError(f"{where}: fmt {fmt!r} is not supported; expected e4m3 or e5m2")
    block = raw.get("weight_block_size")
    checked = None if block is None else block_size(block, f"{where}.weight_block_size")
    return ScaledWeights("fp8", where, "_scale_inv", checked, FP8_DROPPED)


def _gptq(raw: Mapping[str, Any], where: str) -> PackedWeights:
    """gptq: `bits` of 2, 4 or 8 (3-bit words straddle int32s: not supported, nor by
    llama.cpp's converter), `checkpoint_format` gptq (zero points stored less one) or
    gptq_v2; group size and act-order live in the tensors (scales, g_idx)."""
    bits = raw.get("bits")
    if type(bits) is not int or bits not in GPTQ_BITS:
        raise CheckpointError(
            f"{where}.bits: {bits!r} is not supported; expected one of "
            + ", ".join(map(str, GPTQ_BITS))
        )
    fmt = raw.get("checkpoint_format", "gptq")
    if fmt not in GPTQ_FORMATS:
        raise CheckpointError(
            f"{where}.checkpoint_format: {fmt!r} is not supported; expected one of "
            + ", ".join(GPTQ_FORMATS)
        )
    return PackedWeights("gptq", where, bits, fmt == "gptq")


def block_size(value: Any, where: str) -> tuple[int, int]:
    """A block size: two positive ints (rows, columns)."""
    ok = isinstance(value, list | tuple) and len(value) == 2
    if not ok or not all(type(v) is int and v > 0 for v in value):
        raise CheckpointError(f"{where}: {value!r}: expected two positive integers [rows, columns]")
    return value[0], value[1]


def _compressed_tensors(raw: Mapping[str, Any], where: str) -> ScaledWeights | PackedGroups:
    """compressed-tensors: one config group that quantizes weights (any number that quantize
    activations only), in an unpacked format or pack-quantized."""
    fmt = raw.get("format")
    if fmt == "pack-quantized":
        name, scheme = _weight_scheme(raw, where)
        return _pack_quantized(scheme, f"{where}.config_groups.{name}.weights")
    if fmt not in CT_FORMATS:
        raise CheckpointError(
            f"{where}.format: {fmt!r} is not supported; expected one of {', '.join(CT_FORMATS)}"
        )
    groups = raw.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise CheckpointError(f"{where}.config_groups: expected a non-empty JSON object")
    weights = {name: g.get("weights") for name, g in groups.items() if isinstance(g, Mapping)}
    if len(weights) != len(groups):
        raise CheckpointError(f"{where}.config_groups: expected a JSON object per group")
    quantized = {name: w for name, w in weights.items() if w is not None}
    if not quantized:
        return ScaledWeights("compressed-tensors", where, "_scale", None, CT_DROPPED, False)
    if len(quantized) > 1:
        raise CheckpointError(
            f"{where}.config_groups: groups {', '.join(quantized)} all quantize weights; "
            "expected one such group"
        )
    name, scheme = next(iter(quantized.items()))
    return ScaledWeights(
        "compressed-tensors",
        where,
        "_scale",
        _ct_block(scheme, f"{where}.config_groups.{name}.weights"),
        CT_DROPPED,
    )


def _weight_scheme(raw: Mapping[str, Any], where: str) -> tuple[str, Any]:
    """The one config group that quantizes weights, by name, and its weight scheme."""
    groups = raw.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise CheckpointError(f"{where}.config_groups: expected a non-empty JSON object")
    quantized = {
        name: g.get("weights")
        for name, g in groups.items()
        if isinstance(g, Mapping) and g.get("weights") is not None
    }
    if len(quantized) != 1:
        raise CheckpointError(
            f"{where}.config_groups: {len(quantized)} groups quantize weights; expected one"
        )
    return next(iter(quantized.items()))


def _pack_quantized(scheme: Any, where: str) -> PackedGroups:
    """pack-quantized: int weights of 4 or 8 bits in groups along the input axis (the
    strategy llama.cpp's converter takes), symmetric or with zero points."""
    if not isinstance(scheme, Mapping):
        raise CheckpointError(f"{where}: expected a JSON object")
    kind, bits = scheme.get("type", "int"), scheme.get("num_bits")
    if kind != "int" or bits not in (4, 8):
        raise CheckpointError(
            f"{where}: type {kind!r} of {bits!r} bits is not supported for pack-quantized; "
            "expected int of 4 or 8 bits"
        )
    if scheme.get("strategy") != "group":
        raise CheckpointError(
            f"{where}.strategy: {scheme.get('strategy')!r} is not supported for "
            "pack-quantized; expected group"
        )
    group = scheme.get("group_size")
    if type(group) is not int or group < 1:
        raise CheckpointError(f"{where}.group_size: {group!r}: expected a positive integer")
    return PackedGroups("compressed-tensors", where, bits, group)


def _ct_block(scheme: Any, where: str) -> tuple[int, int] | None:
    """The block of one compressed-tensors weight scheme (None: channel or tensor scales)."""
    if not isinstance(scheme, Mapping):
        raise CheckpointError(f"{where}: expected a JSON object")
    kind, bits = scheme.get("type", "int"), scheme.get("num_bits")
    if (kind, bits) not in (("float", 8), ("int", 8), ("int", 4)):
        raise CheckpointError(
            f"{where}: type {kind!r} of {bits!r} bits is not supported; expected float of 8 "
            "bits, or int of 8 or 4 bits (one value per byte)"
        )
    if scheme.get("symmetric", True) is not True:
        raise CheckpointError(
            f"{where}: symmetric {scheme.get('symmetric')!r} is not supported; expected true "
            "(weights without zero points)"
        )
    strategy = scheme.get("strategy")
    if strategy not in CT_STRATEGIES:
        raise CheckpointError(
            f"{where}.strategy: {strategy!r} is not supported; expected one of "
            f"{', '.join(CT_STRATEGIES)}"
        )
    if strategy == "block":
        return block_size(scheme.get("block_structure"), f"{where}.block_structure")
    if strategy == "group":
        group = scheme.get("group_size")
        if type(group) is not int or group < 1:
            raise CheckpointError(f"{where}.group_size: {group!r}: expected a positive integer")
        return 1, group
    return None
