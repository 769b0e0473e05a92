"""Small Hugging Face model folders in the real layout: config.json as transformers writes it,
sharded safetensors with an index, random weights. Tokenizers come from tokenizer_fixtures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file


@dataclass(frozen=True)
class Shape:
    """The hyperparameters of a fixture model."""

    kind: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    vocab: int = 320
    experts: int = 0
    experts_used: int = 2
    tied: bool = False
    head_dim: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return self.head_dim or self.hidden // self.heads


HF_NAMES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mixtral": "MixtralForCausalLM",
}
MODEL_TYPES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "mixtral": "mixtral",
}

SHAPES = {
    "llama": Shape("llama"),
    "mistral": Shape("mistral"),
    "qwen2": Shape("qwen2", tied=True),
    "qwen3": Shape("qwen3", head_dim=32, tied=True),
    "mixtral": Shape("mixtral", experts=4),
}


def config_of(shape: Shape) -> dict[str, Any]:
    """config.json as transformers writes it for the shape's architecture."""
    config: dict[str, Any] = {
        "architectures": [HF_NAMES[shape.kind]],
        "attention_bias": shape.kind == "qwen2",
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": shape.hidden,
        "initializer_range": 0.02,
        "intermediate_size": shape.intermediate,
        "max_position_embeddings": 2048,
        "model_type": MODEL_TYPES[shape.kind],
        "num_attention_heads": shape.heads,
        "num_hidden_layers": shape.layers,
        "num_key_value_heads": shape.kv_heads,
        "rms_norm_eps": 1e-06 if shape.kind.startswith("qwen") else 1e-05,
        "rope_scaling": None,
        "rope_theta": 1000000.0 if shape.kind.startswith("qwen") else 10000.0,
        "tie_word_embeddings": shape.tied,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.6",
        "use_cache": True,
        "vocab_size": shape.vocab,
    }
    if shape.head_dim is not None:
        config["head_dim"] = shape.head_dim
    if shape.experts:
        config.update(num_local_experts=shape.experts, num_experts_per_tok=shape.experts_used)
    config.update(shape.extra)
    return config


def tensor_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors in the order transformers' state dict lists them."""
    h, d, f = shape.hidden, shape.dim, shape.intermediate
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (shape.vocab, h)}
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        out[f"{p}.self_attn.q_proj.weight"] = (shape.heads * d, h)
        out[f"{p}.self_attn.k_proj.weight"] = (shape.kv_heads * d, h)
        out[f"{p}.self_attn.v_proj.weight"] = (shape.kv_heads * d, h)
        if shape.kind == "qwen2":
            out[f"{p}.self_attn.q_proj.bias"] = (shape.heads * d,)
            out[f"{p}.self_attn.k_proj.bias"] = (shape.kv_heads * d,)
            out[f"{p}.self_attn.v_proj.bias"] = (shape.kv_heads * d,)
        out[f"{p}.self_attn.o_proj.weight"] = (h, shape.heads * d)
        if shape.kind == "qwen3":
            out[f"{p}.self_attn.q_norm.weight"] = (d,)
            out[f"{p}.self_attn.k_norm.weight"] = (d,)
        if shape.experts:
            out[f"{p}.block_sparse_moe.gate.weight"] = (shape.experts, h)
            for x in range(shape.experts):
                e = f"{p}.block_sparse_moe.experts.{x}"
                out[f"{e}.w1.weight"] = (f, h)
                out[f"{e}.w2.weight"] = (h, f)
                out[f"{e}.w3.weight"] = (f, h)
        else:
            out[f"{p}.mlp.gate_proj.weight"] = (f, h)
            out[f"{p}.mlp.up_proj.weight"] = (f, h)
            out[f"{p}.mlp.down_proj.weight"] = (h, f)
        out[f"{p}.input_layernorm.weight"] = (h,)
        out[f"{p}.post_attention_layernorm.weight"] = (h,)
    out["model.norm.weight"] = (h,)
    if not shape.tied:
        out["lm_head.weight"] = (shape.vocab, h)
    return out


def random_weights(
    shape: Shape, seed: int = 0, dtype: Any = ml_dtypes.bfloat16
) -> dict[str, np.ndarray]:
    """Random weights of the shape (norms near 1), in `dtype`."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in tensor_shapes(shape).items():
        values = rng.standard_normal(dims, dtype=np.float32) * 0.05
        if "norm" in name:
            values += 1.0
        out[name] = values.astype(dtype)
    return out


def write_checkpoint(
    folder: Path,
    weights: dict[str, np.ndarray],
    config: dict[str, Any],
    shards: int = 2,
) -> Path:
    """config.json and `shards` safetensors files with a model.safetensors.index.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    names = list(weights)
    per_shard = -(-len(names) // shards)
    weight_map = {}
    for index in range(shards):
        file = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        chunk = names[index * per_shard : (index + 1) * per_shard]
        save_file({n: weights[n] for n in chunk}, str(folder / file), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(chunk, file))
    total = sum(int(w.nbytes) for w in weights.values())
    index_doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index_doc, indent=2))
    return folder


def write_model(folder: Path, kind: str, shards: int = 2, **changes: Any) -> Path:
    """A whole model folder of architecture `kind` (weights and config, no tokenizer)."""
    shape = replace(SHAPES[kind], **changes)
    return write_checkpoint(folder, random_weights(shape), config_of(shape), shards)
