"""Small checkpoints of StableLM, GLM-4 (dense) and EXAONE 3: config.json as the family's
releases have it, the tensors Hugging Face checkpoints hold (EXAONE's `transformer.h.*` names),
random bfloat16 weights; written with hf_fixtures' sharded writer. Builds on fixtures_dense's
`Dense` and fixtures_moe's GLM tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gguf
import ml_dtypes
import numpy as np
from fixtures_dense import ABSENT, Dense
from fixtures_moe import write_glm_tokenizer
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.targets.llamacpp.target import GGUFTarget


def _stablelm_config(model: Dense) -> dict[str, Any]:
    return {
        "architectures": ["StableLmForCausalLM"],
        "layer_norm_eps": 1e-05,
        "partial_rotary_factor": 0.25,
        "qk_layernorm": False,
        "rope_theta": 10000,
        "use_parallel_residual": False,
        "use_qkv_bias": True,
    }


def _glm4_config(model: Dense) -> dict[str, Any]:
    return {
        "architectures": ["Glm4ForCausalLM"],
        "attention_bias": True,
        "bos_token_id": ABSENT,  # GLM-4's releases set none: its converter picks <|endoftext|>
        "head_dim": model.hidden // model.heads,
        "partial_rotary_factor": 0.5,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
    }


def _exaone_config(model: Dense) -> dict[str, Any]:
    return {
        "architectures": ["ExaoneForCausalLM"],
        "activation_function": "silu",
        "head_dim": model.hidden // model.heads,
        "layer_norm_epsilon": 1e-05,
        "num_layers": model.layers,
        "rope_theta": 1000000.0,
    }


_CONFIGS: dict[str, Callable[[Dense], dict[str, Any]]] = {
    "stablelm": _stablelm_config,
    "glm4": _glm4_config,
    "exaone": _exaone_config,
}


def config_of(model: Dense) -> dict[str, Any]:
    """config.json as the family's releases write it (the shared keys, then the family's)."""
    config: dict[str, Any] = {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": model.hidden,
        "intermediate_size": model.intermediate,
        "max_position_embeddings": 4096,
        "model_type": model.kind,
        "num_attention_heads": model.heads,
        "num_hidden_layers": model.layers,
        "num_key_value_heads": model.kv_heads,
        "tie_word_embeddings": model.tied,
        "torch_dtype": "bfloat16",
        "vocab_size": model.vocab,
        **_CONFIGS[model.kind](model),
    }
    config.update(model.extra)
    return {key: value for key, value in config.items() if value is not ABSENT}


def _attention(model: Dense, prefix: str, bias: bool) -> dict[str, tuple[int, ...]]:
    h, d = model.hidden, model.dim
    rows = {"q": model.heads * d, "k": model.kv_heads * d, "v": model.kv_heads * d}
    out: dict[str, tuple[int, ...]] = {}
    for p, n in rows.items():
        out[f"{prefix}{p}_proj.weight"] = (n, h)
        if bias:
            out[f"{prefix}{p}_proj.bias"] = (n,)
    return out


def _stablelm_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    """LayerNorms with biases (no second one with use_parallel_residual), q/k/v biases with
    use_qkv_bias, llama's gated MLP."""
    h, f = model.hidden, model.intermediate
    out = {"input_layernorm.weight": (h,), "input_layernorm.bias": (h,)}
    out.update(_attention(model, "self_attn.", bool(model.extra.get("use_qkv_bias", True))))
    out["self_attn.o_proj.weight"] = (h, model.heads * model.dim)
    out.update({"mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h)})
    out["mlp.down_proj.weight"] = (h, f)
    if not model.extra.get("use_parallel_residual", False):
        out.update({"post_attention_layernorm.weight": (h,), "post_attention_layernorm.bias": (h,)})
    return out


def _glm4_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    """q/k/v with biases, norms before and after attention and MLP, gate and up fused."""
    h, f = model.hidden, model.intermediate
    out = {"input_layernorm.weight": (h,), **_attention(model, "self_attn.", True)}
    out["self_attn.o_proj.weight"] = (h, model.heads * model.dim)
    for norm in ("post_attention_layernorm", "post_self_attn_layernorm", "post_mlp_layernorm"):
        out[f"{norm}.weight"] = (h,)
    out.update({"mlp.gate_up_proj.weight": (2 * f, h), "mlp.down_proj.weight": (h, f)})
    return out


def _exaone_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    """GPT-2 style names for llama's layer: ln_1, attn.attention.*, ln_2, c_fc_0/1, c_proj."""
    h, f = model.hidden, model.intermediate
    out = {"ln_1.weight": (h,), **_attention(model, "attn.attention.", False)}
    out["attn.attention.out_proj.weight"] = (h, model.heads * model.dim)
    out["ln_2.weight"] = (h,)
    out.update({"mlp.c_fc_0.weight": (f, h), "mlp.c_fc_1.weight": (f, h)})
    out["mlp.c_proj.weight"] = (h, f)
    return out


_OUTER = {
    "stablelm": ("model.embed_tokens", "model.layers", ("model.norm.weight", "model.norm.bias")),
    "glm4": ("model.embed_tokens", "model.layers", ("model.norm.weight",)),
    "exaone": ("transformer.wte", "transformer.h", ("transformer.ln_f.weight",)),
}
LAYERS: dict[str, Callable[[Dense], dict[str, tuple[int, ...]]]] = {
    "stablelm": _stablelm_layer,
    "glm4": _glm4_layer,
    "exaone": _exaone_layer,
}
MODELS = {
    "stablelm": Dense("stablelm", kv_heads=4),
    "glm4": Dense("glm4"),
    "exaone": Dense("exaone"),
}


def tensor_shapes(model: Dense) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors: embeddings, each layer's, the final norm, the head."""
    embeddings, layers, final = _OUTER[model.kind]
    out: dict[str, tuple[int, ...]] = {f"{embeddings}.weight": (model.vocab, model.hidden)}
    for layer in range(model.layers):
        for name, dims in LAYERS[model.kind](model).items():
            out[f"{layers}.{layer}.{name}"] = dims
    out.update({name: (model.hidden,) for name in final})
    if not model.tied:
        out["lm_head.weight"] = (model.vocab, model.hidden)
    return out


def random_weights(model: Dense, seed: int = 0) -> dict[str, np.ndarray]:
    """Random bfloat16 weights of the model's tensors (norm weights near 1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in tensor_shapes(model).items():
        values = rng.standard_normal(dims, dtype=np.float32) * 0.05
        if ("norm" in name or ".ln_" in name) and name.endswith("weight"):
            values += 1.0
        out[name] = values.astype(ml_dtypes.bfloat16)
    return out


def dense_model(kind: str, **changes: Any) -> Dense:
    """The fixture model of `kind` with `changes`; an `extra` change adds to the defaults."""
    base = MODELS[kind]
    if "extra" in changes:
        changes["extra"] = {**base.extra, **changes["extra"]}
    return replace(base, **changes)


def write_dense(folder: Path, model: Dense) -> tuple[Path, dict[str, np.ndarray]]:
    """The model's folder (config.json, three safetensors shards) and its weights."""
    weights = random_weights(model)
    return write_checkpoint(folder, weights, config_of(model), shards=3), weights


def gguf_file(tmp_path: Path, model: Dense, type_name: str, pre: str = "llama-bpe") -> Any:
    """Convert `model` with a trained tokenizer (GLM's for glm4, Llama-3 style otherwise) to a
    file; its gguf-py reader."""
    folder = tmp_path / model.kind
    if model.kind == "glm4":
        model = replace(model, vocab=write_glm_tokenizer(folder, model.vocab))
    else:
        model = replace(model, vocab=write_bpe_tokenizer(folder, model.vocab, "llama3"))
    write_dense(folder, model)
    dst = tmp_path / f"{model.kind}.gguf"
    lazyparams.convert(GGUFTarget(type_name, pre=pre), folder, dst, progress=False)
    return gguf.GGUFReader(dst)
