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
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
MODEL_TYPES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "mixtral": "mixtral",
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "qwen2_moe": "qwen2_moe",
    "qwen3_moe": "qwen3_moe",
}

# multi-head latent attention: q (through a rank-48 latent in V3), a rank-32 key-value latent
_MLA = {"qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "kv_lora_rank": 32}
_DEEPSEEK = {**_MLA, "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1}
_YARN = {
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 128,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 0.707,
}
_V3 = {"q_lora_rank": 48, "n_group": 2, "topk_group": 1, "norm_topk_prob": True}
_V3.update(routed_scaling_factor=2.5, scoring_func="sigmoid", rope_scaling=_YARN)
_QWEN_MOE = {"moe_intermediate_size": 32, "decoder_sparse_step": 1, "mlp_only_layers": []}

SHAPES = {
    "llama": Shape("llama"),
    "mistral": Shape("mistral"),
    "qwen2": Shape("qwen2", tied=True),
    "qwen3": Shape("qwen3", head_dim=32, tied=True),
    "mixtral": Shape("mixtral", experts=4),
    "deepseek_v2": Shape(
        "deepseek_v2", layers=3, kv_heads=4, experts=4, extra={**_DEEPSEEK, "q_lora_rank": None}
    ),
    "deepseek_v3": Shape(
        "deepseek_v3", layers=3, kv_heads=4, experts=4, extra={**_DEEPSEEK, **_V3}
    ),
    "qwen2_moe": Shape(
        "qwen2_moe", experts=4, extra={**_QWEN_MOE, "shared_expert_intermediate_size": 96}
    ),
    "qwen3_moe": Shape("qwen3_moe", head_dim=32, experts=4, extra=_QWEN_MOE),
}
MOE_KINDS = ("deepseek_v2", "deepseek_v3", "qwen2_moe", "qwen3_moe")
"""Families whose experts, routers and attention `moe_tensor_shapes` lays out."""


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
        key = "n_routed_experts" if shape.kind.startswith("deepseek") else "num_local_experts"
        config.update({key: shape.experts, "num_experts_per_tok": shape.experts_used})
    config.update(shape.extra)
    return config


def tensor_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors in the order transformers' state dict lists them."""
    if shape.kind in MOE_KINDS:
        return moe_tensor_shapes(shape)
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


def moe_tensor_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    """DeepSeek-V2/V3 and Qwen-MoE checkpoints' tensors, in transformers' order."""
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (shape.vocab, shape.hidden)}
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        out[f"{p}.input_layernorm.weight"] = (shape.hidden,)
        attention = _mla_shapes if shape.kind.startswith("deepseek") else _qwen_attention_shapes
        out.update({f"{p}.self_attn.{k}": v for k, v in attention(shape).items()})
        out.update({f"{p}.mlp.{k}": v for k, v in _ffn_shapes(shape, i).items()})
        out[f"{p}.post_attention_layernorm.weight"] = (shape.hidden,)
    out["model.norm.weight"] = (shape.hidden,)
    if not shape.tied:
        out["lm_head.weight"] = (shape.vocab, shape.hidden)
    return out


def _mla_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    x, h, n = shape.extra, shape.hidden, shape.heads
    qk = x["qk_nope_head_dim"] + x["qk_rope_head_dim"]
    out: dict[str, tuple[int, ...]] = {}
    if x.get("q_lora_rank") is None:
        out["q_proj.weight"] = (n * qk, h)
    else:
        out["q_a_proj.weight"] = (x["q_lora_rank"], h)
        out["q_a_layernorm.weight"] = (x["q_lora_rank"],)
        out["q_b_proj.weight"] = (n * qk, x["q_lora_rank"])
    out["kv_a_proj_with_mqa.weight"] = (x["kv_lora_rank"] + x["qk_rope_head_dim"], h)
    out["kv_a_layernorm.weight"] = (x["kv_lora_rank"],)
    out["kv_b_proj.weight"] = (n * (x["qk_nope_head_dim"] + x["v_head_dim"]), x["kv_lora_rank"])
    out["o_proj.weight"] = (h, n * x["v_head_dim"])
    return out


def _qwen_attention_shapes(shape: Shape) -> dict[str, tuple[int, ...]]:
    h, d, n, kv = shape.hidden, shape.dim, shape.heads, shape.kv_heads
    out: dict[str, tuple[int, ...]] = {"q_proj.weight": (n * d, h)}
    out.update({"k_proj.weight": (kv * d, h), "v_proj.weight": (kv * d, h)})
    if shape.kind == "qwen2_moe":
        out.update({"q_proj.bias": (n * d,), "k_proj.bias": (kv * d,), "v_proj.bias": (kv * d,)})
    out["o_proj.weight"] = (h, n * d)
    if shape.kind == "qwen3_moe":
        out.update({"q_norm.weight": (d,), "k_norm.weight": (d,)})
    return out


def _ffn_shapes(shape: Shape, layer: int) -> dict[str, tuple[int, ...]]:
    """A dense MLP in DeepSeek's leading layers, else router, experts and shared experts."""
    h, x = shape.hidden, shape.extra
    if layer < x.get("first_k_dense_replace", 0):
        f = shape.intermediate
        return {"gate_proj.weight": (f, h), "up_proj.weight": (f, h), "down_proj.weight": (h, f)}
    m = x["moe_intermediate_size"]
    out: dict[str, tuple[int, ...]] = {"gate.weight": (shape.experts, h)}
    if shape.kind == "deepseek_v3":
        out["gate.e_score_correction_bias"] = (shape.experts,)
    for e in range(shape.experts):
        out[f"experts.{e}.gate_proj.weight"] = (m, h)
        out[f"experts.{e}.up_proj.weight"] = (m, h)
        out[f"experts.{e}.down_proj.weight"] = (h, m)
    shared = x.get("shared_expert_intermediate_size") or m * x.get("n_shared_experts", 0)
    name = "shared_experts" if shape.kind.startswith("deepseek") else "shared_expert"
    if shared:
        out[f"{name}.gate_proj.weight"] = (shared, h)
        out[f"{name}.up_proj.weight"] = (shared, h)
        out[f"{name}.down_proj.weight"] = (h, shared)
    if shape.kind == "qwen2_moe":
        out["shared_expert_gate.weight"] = (1, h)
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
