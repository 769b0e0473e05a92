"""Pre-quantized Hugging Face folders made with the published formulas: FP8 with block scales
(absmax per block / 448, as DeepSeek-V3 and the Qwen3 -FP8 models ship them), FP8 with one scale
per tensor, and compressed-tensors' float and int schemes. Built on hf_fixtures' models."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from tests.targets.llamacpp.hf_fixtures import SHAPES, config_of, random_weights, write_checkpoint

FP8 = ml_dtypes.float8_e4m3fn
FP8_MAX = 448.0


def quantized_names(weights: dict[str, np.ndarray]) -> list[str]:
    """The linear weights a quantizer converts: 2-D, not the embedding nor the output."""
    keep = ("embed_tokens", "lm_head", "norm", ".gate.weight")
    return [n for n, w in weights.items() if w.ndim == 2 and not any(k in n for k in keep)]


def block_fp8(w: np.ndarray, block: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(float8 weight, float32 scale per block): scale = absmax / 448, weight / scale rounded
    to float8 (the last blocks cut short where the block does not divide the weight)."""
    w = w.astype(np.float32)
    rows, cols = math.ceil(w.shape[0] / block[0]), math.ceil(w.shape[1] / block[1])
    scale = np.zeros((rows, cols), np.float32)
    q = np.zeros(w.shape, FP8)
    for i in range(rows):
        for j in range(cols):
            cut = (slice(i * block[0], (i + 1) * block[0]), slice(j * block[1], (j + 1) * block[1]))
            part = w[cut]
            scale[i, j] = max(float(np.abs(part).max()), 1e-12) / FP8_MAX
            q[cut] = (part / scale[i, j]).astype(FP8)
    return q, scale


def scale_fp8(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(float8 weight, float32 scale): one scale per tensor (axis None, shape [1]) or per row
    (axis 1, shape [rows, 1])."""
    w = w.astype(np.float32)
    amax = np.abs(w).max(axis=axis, keepdims=axis is not None)
    scale = (
        (np.maximum(amax, 1e-12) / FP8_MAX)
        .astype(np.float32)
        .reshape(-1 if axis is None else (-1, 1))
    )
    return (w / scale).astype(FP8), scale


def int8_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, float32 scale per row): symmetric, absmax / 127."""
    w = w.astype(np.float32)
    scale = (np.maximum(np.abs(w).max(axis=1, keepdims=True), 1e-12) / 127).astype(np.float32)
    return np.clip(np.rint(w / scale), -127, 127).astype(np.int8), scale


def fp8_model(
    folder: Path, kind: str = "qwen3", block: tuple[int, int] | None = (48, 40), **extra: Any
) -> Path:
    """An fp8 checkpoint of `kind`: `X.weight` float8 and `X.weight_scale_inv` (per block, or
    per tensor when `block` is None), config.json with its quantization_config."""
    shape = SHAPES[kind]
    weights = random_weights(shape)
    out: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        if name in quantized_names(weights):
            q, s = block_fp8(w, block) if block else scale_fp8(w, None)
            out[name], out[name + "_scale_inv"] = q, s
        else:
            out[name] = w
    config = config_of(shape)
    quant: dict[str, Any] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
    if block is not None:
        quant["weight_block_size"] = list(block)
    config["quantization_config"] = {**quant, **extra}
    return write_checkpoint(folder, out, config)


def compressed_model(folder: Path, scheme: str, kind: str = "qwen3") -> Path:
    """A compressed-tensors checkpoint: `X.weight` and `X.weight_scale`; `scheme` is
    "fp8-channel", "fp8-block" (block 48 x 40) or "int8-channel"."""
    shape = SHAPES[kind]
    weights = random_weights(shape)
    out: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        if name not in quantized_names(weights):
            out[name] = w
            continue
        if scheme == "fp8-block":
            q, s = block_fp8(w, (48, 40))
        elif scheme == "fp8-channel":
            q, s = scale_fp8(w, 1)
        else:
            q, s = int8_rows(w)
        out[name], out[name + "_scale"] = q, s
        out[name.removesuffix(".weight") + ".input_scale"] = np.ones((1,), np.float32)
    config = config_of(shape)
    config["quantization_config"] = compressed_config(scheme)
    return write_checkpoint(folder, out, config)


def compressed_config(scheme: str) -> dict[str, Any]:
    """The quantization_config llm-compressor writes for `scheme`."""
    fp8 = scheme.startswith("fp8")
    weights: dict[str, Any] = {
        "num_bits": 8,
        "type": "float" if fp8 else "int",
        "symmetric": True,
        "strategy": "block" if scheme == "fp8-block" else "channel",
        "dynamic": False,
        "group_size": None,
        "block_structure": [48, 40] if scheme == "fp8-block" else None,
    }
    activations = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized" if fp8 else "int-quantized",
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": weights, "input_activations": activations}
        },
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "quantization_status": "compressed",
    }
