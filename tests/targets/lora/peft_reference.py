"""Helpers of the LoRA tests: a tiny llama-shaped base model, PEFT adapters of it written with numpy and safetensors
(tensor names as PEFT's save_pretrained writes them), and numpy references of PEFT's merge
written from its definitions (peft 0.22, tuners/lora/layer.py, variants.py, dora.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

F32 = np.float32
BF16 = ml_dtypes.bfloat16
PREFIX = "base_model.model."
LAYERS = 2
SHAPES = {
    "model.embed_tokens.weight": (16, 8),
    "model.layers.{i}.self_attn.q_proj.weight": (8, 8),
    "model.layers.{i}.self_attn.v_proj.weight": (4, 8),
    "model.layers.{i}.mlp.up_proj.weight": (12, 8),
    "model.layers.{i}.mlp.down_proj.weight": (8, 12),
    "model.layers.{i}.input_layernorm.weight": (8,),
    "model.norm.weight": (8,),
    "lm_head.weight": (16, 8),
}
TOKENIZER = {"model": {"type": "BPE", "vocab": {"a": 0}}}


def base_tensors(seed: int = 1, dtype: Any = F32) -> dict[str, np.ndarray]:
    """The base's state dict, in checkpoint order."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for pattern, shape in SHAPES.items():
        for i in range(LAYERS) if "{i}" in pattern else [None]:
            tensors[pattern.format(i=i)] = rng.standard_normal(shape).astype(F32).astype(dtype)
    return tensors


def write_base(folder: Path, tensors: dict[str, np.ndarray]) -> Path:
    """A Hugging Face-like folder: model.safetensors, config.json, tokenizer.json."""
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": LAYERS}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text(json.dumps(TOKENIZER))
    return folder


def adapter_config(**fields: Any) -> dict[str, Any]:
    """adapter_config.json as PEFT 0.22 writes it (its bookkeeping keys included)."""
    config: dict[str, Any] = {
        "base_model_name_or_path": "base",
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
        "init_lora_weights": True,
        "layers_pattern": None,
        "layers_to_transform": None,
        "lora_alpha": 16,
        "lora_bias": False,
        "lora_dropout": 0.0,
        "megatron_core": "megatron.core",
        "modules_to_save": None,
        "peft_type": "LORA",
        "peft_version": "0.22.0",
        "qalora_group_size": 16,
        "r": 4,
        "rank_pattern": {},
        "alpha_pattern": {},
        "target_modules": ["q_proj", "v_proj"],
        "task_type": "CAUSAL_LM",
        "trainable_token_indices": None,
        "use_dora": False,
        "use_rslora": False,
    }
    config.update(fields)
    return config


def write_adapter(folder: Path, tensors: dict[str, np.ndarray], **config: Any) -> Path:
    """A PEFT adapter folder: adapter_model.safetensors (names given without PREFIX) and
    adapter_config.json."""
    folder.mkdir(parents=True)
    save_file(
        {PREFIX + k: v for k, v in tensors.items()}, str(folder / "adapter_model.safetensors")
    )
    (folder / "adapter_config.json").write_text(json.dumps(adapter_config(**config)))
    return folder


def lora_factors(
    rng: np.random.Generator, weight: np.ndarray, rank: int, transposed: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of `rank` for a weight (its transpose when `transposed`), float32."""
    rows, cols = weight.shape[::-1] if transposed else weight.shape
    a = rng.standard_normal((rank, cols)).astype(F32)
    b = (rng.standard_normal((rows, rank)) * 0.1).astype(F32)
    return a, b


# PEFT's merge, from its definitions -----------------------------------------------------------


def peft_delta(
    a: np.ndarray, b: np.ndarray, scaling: float, transposed: bool, embedding: bool = False
) -> np.ndarray:
    """get_delta_weight: (B @ A), transposed for fan_in_fan_out and embeddings, times the
    scaling; float16/bfloat16 factors are widened to float32 and the result cast back to
    lora_B's dtype (lora_embedding_A's for an embedding)."""
    stored = a.dtype if embedding else b.dtype
    wide = np.dtype(F32) if stored in (np.float16, BF16) else stored
    product = b.astype(wide) @ a.astype(wide)
    if transposed:
        product = product.T
    return (product * wide.type(scaling)).astype(stored)


def peft_add(weight: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """`weight += delta` in place: the sum in float32, rounded once to the weight's dtype."""
    return (weight.astype(F32) + delta.astype(F32)).astype(weight.dtype)


def peft_dora(
    unmerged: np.ndarray, weight: np.ndarray, delta: np.ndarray, magnitude: np.ndarray, axis: int
) -> np.ndarray:
    """DoRA's merge: m / ||W0 + dW|| (norms over the input axis) times (W + dW), float32."""
    combined = unmerged.astype(F32) + delta.astype(F32)
    norm = np.sqrt(np.sum(combined * combined, axis=axis, keepdims=True, dtype=F32))
    factor = magnitude.reshape((-1, 1) if axis == 1 else (1, -1)) / norm
    return (factor * (weight.astype(F32) + delta.astype(F32))).astype(weight.dtype)
