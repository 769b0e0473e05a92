"""Small checkpoints of the dense families llama.cpp has its own architecture for (OLMo 2, ...):
config.json as the hub's releases have it (rope_theta at the top, rope_scaling), the tensors
transformers saves, random weights; written with hf_fixtures' sharded writer. Tokenizers come
from tokenizer_fixtures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gguf
import ml_dtypes
import numpy as np
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.targets.llamacpp.target import GGUFTarget

ABSENT = object()
"""An `extra` value that removes the key from config.json."""


@dataclass(frozen=True)
class Dense:
    """The hyperparameters of a fixture model of family `kind`."""

    kind: str
    hidden: int = 64
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 160
    vocab: int = 320
    tied: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        head_dim = self.extra.get("head_dim")
        return head_dim if isinstance(head_dim, int) else self.hidden // self.heads


def config_of(model: Dense) -> dict[str, Any]:
    """config.json as the family's releases write it."""
    config: dict[str, Any] = {
        "architectures": [HF_NAMES[model.kind]],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "hidden_size": model.hidden,
        "initializer_range": 0.02,
        "intermediate_size": model.intermediate,
        "max_position_embeddings": 4096,
        "model_type": model.kind,
        "num_attention_heads": model.heads,
        "num_hidden_layers": model.layers,
        "num_key_value_heads": model.kv_heads,
        "pad_token_id": 0,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 500000.0,
        "tie_word_embeddings": model.tied,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.48.0",
        "use_cache": True,
        "vocab_size": model.vocab,
    }
    config.update(model.extra)
    return {key: value for key, value in config.items() if value is not ABSENT}


def _llama_attention(model: Dense) -> dict[str, tuple[int, ...]]:
    h, d = model.hidden, model.dim
    return {
        "self_attn.q_proj.weight": (model.heads * d, h),
        "self_attn.k_proj.weight": (model.kv_heads * d, h),
        "self_attn.v_proj.weight": (model.kv_heads * d, h),
        "self_attn.o_proj.weight": (h, model.heads * d),
    }


def _gated_mlp(model: Dense) -> dict[str, tuple[int, ...]]:
    h, f = model.hidden, model.intermediate
    return {
        "mlp.down_proj.weight": (h, f),
        "mlp.gate_proj.weight": (f, h),
        "mlp.up_proj.weight": (f, h),
    }


def _olmo2_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    h, d = model.hidden, model.dim
    return {
        **_llama_attention(model),
        "self_attn.q_norm.weight": (model.heads * d,),
        "self_attn.k_norm.weight": (model.kv_heads * d,),
        **_gated_mlp(model),
        "post_attention_layernorm.weight": (h,),
        "post_feedforward_layernorm.weight": (h,),
    }


def _llama_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    return {
        "input_layernorm.weight": (model.hidden,),
        **_llama_attention(model),
        **_gated_mlp(model),
        "post_attention_layernorm.weight": (model.hidden,),
    }


def _cohere_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    """One LayerNorm (weights only) before attention and MLP run in parallel; Command R+'s
    per-head q/k norms with use_qk_norm."""
    out = {"input_layernorm.weight": (model.hidden,), **_gated_mlp(model)}
    out.update(_llama_attention(model))
    if model.extra.get("use_qk_norm"):
        out["self_attn.q_norm.weight"] = (model.heads, model.dim)
        out["self_attn.k_norm.weight"] = (model.kv_heads, model.dim)
    return out


def _starcoder2_layer(model: Dense) -> dict[str, tuple[int, ...]]:
    """LayerNorms with biases, a plain c_fc -> c_proj MLP, biases with use_bias."""
    h, f = model.hidden, model.intermediate
    out: dict[str, tuple[int, ...]] = {}
    for norm in ("input_layernorm", "post_attention_layernorm"):
        out.update({f"{norm}.weight": (h,), f"{norm}.bias": (h,)})
    weights = {**_llama_attention(model), "mlp.c_fc.weight": (f, h), "mlp.c_proj.weight": (h, f)}
    for name, dims in weights.items():
        out[name] = dims
        if model.extra.get("use_bias", True):
            out[name.replace(".weight", ".bias")] = dims[:1]
    return out


HF_NAMES = {
    "olmo2": "Olmo2ForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
    "cohere": "CohereForCausalLM",
    "cohere2": "Cohere2ForCausalLM",
    "starcoder2": "Starcoder2ForCausalLM",
}
LAYERS: dict[str, Callable[[Dense], dict[str, tuple[int, ...]]]] = {
    "olmo2": _olmo2_layer,
    "smollm3": _llama_layer,
    "cohere": _cohere_layer,
    "cohere2": _cohere_layer,
    "starcoder2": _starcoder2_layer,
}
_SMOLLM3 = {"no_rope_layer_interval": 4, "no_rope_layers": [1, 1, 1, 0], "rope_theta": 5000000.0}
_COHERE = {"layer_norm_eps": 1e-05, "rms_norm_eps": ABSENT, "logit_scale": 0.0625}
_COHERE2 = {**_COHERE, "logit_scale": 0.25, "rotary_pct": 1.0, "sliding_window": 512}
_COHERE2.update(sliding_window_pattern=4, rope_theta=50000.0)
_STARCODER2 = {"norm_epsilon": 1e-05, "rms_norm_eps": ABSENT, "use_bias": True}
_STARCODER2.update(hidden_act="gelu_pytorch_tanh", sliding_window=4096, rope_theta=999999.4)
MODELS = {
    "olmo2": Dense("olmo2"),
    "smollm3": Dense("smollm3", layers=4, tied=True, extra=_SMOLLM3),
    "cohere": Dense("cohere", tied=True, extra={**_COHERE, "use_qk_norm": False}),
    "cohere2": Dense("cohere2", layers=4, tied=True, extra=_COHERE2),
    "starcoder2": Dense("starcoder2", tied=True, extra=_STARCODER2),
}
BIASED_FINAL_NORM = ("starcoder2",)
"""Families whose final norm is a LayerNorm with a bias."""


def tensor_shapes(model: Dense) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors: embeddings, each layer's, the final norm, the head."""
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (model.vocab, model.hidden)}
    for layer in range(model.layers):
        for name, dims in LAYERS[model.kind](model).items():
            out[f"model.layers.{layer}.{name}"] = dims
    out["model.norm.weight"] = (model.hidden,)
    if model.kind in BIASED_FINAL_NORM:
        out["model.norm.bias"] = (model.hidden,)
    if not model.tied:
        out["lm_head.weight"] = (model.vocab, model.hidden)
    return out


def random_weights(model: Dense, seed: int = 0) -> dict[str, np.ndarray]:
    """Random bfloat16 weights of the model's tensors (norms near 1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in tensor_shapes(model).items():
        values = rng.standard_normal(dims, dtype=np.float32) * 0.05
        if "norm" in name:
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


def converted(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    """The GGUF tensors of `folder` as arrays (q8_0 as its blocks' bytes), in file order."""
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def with_bpe_tokenizer(folder: Path, model: Dense, style: str = "llama3") -> Dense:
    """`model` with the vocab size of a byte-level BPE tokenizer trained into `folder`."""
    return replace(model, vocab=write_bpe_tokenizer(folder, model.vocab, style))


def gguf_file(tmp_path: Path, model: Dense, type_name: str, pre: str = "llama-bpe") -> Any:
    """Convert `model` with a trained Llama-3 style tokenizer to a file; its gguf-py reader."""
    folder = tmp_path / model.kind
    model = with_bpe_tokenizer(folder, model)
    write_dense(folder, model)
    dst = tmp_path / f"{model.kind}.gguf"
    lazyparams.convert(GGUFTarget(type_name, pre=pre), folder, dst, progress=False)
    return gguf.GGUFReader(dst)


def fields_of(reader: Any) -> dict[str, Any]:
    """A gguf-py reader's KV pairs as Python values, in file order."""
    return {name: field.contents() for name, field in reader.fields.items()}
