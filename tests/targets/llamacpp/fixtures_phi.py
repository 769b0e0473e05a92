"""Small checkpoints of the Phi and Granite families: config.json as the hub's releases have it,
the tensors transformers saves (Phi-3's fused qkv_proj and gate_up_proj, GraniteMoe's stacked
input_linear / output_linear experts, phi-2's biases), random weights, written with hf_fixtures'
sharded writer; the Phi-3 sentencepiece tokenizer with added tokens as its releases ship them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gguf
import ml_dtypes
import numpy as np
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer, write_json, write_sentencepiece_tokenizer

import lazyparams

ABSENT = object()
"""An `extra` value that removes the key from config.json."""


@dataclass(frozen=True)
class Model:
    """The hyperparameters of a fixture model of family `kind`."""

    kind: str
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 96
    vocab: int = 320
    experts: int = 4
    shared: int = 0
    tied: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return self.hidden // self.heads


HF_NAMES = {
    "phi3": "Phi3ForCausalLM",
    "granite": "GraniteForCausalLM",
    "granitemoe": "GraniteMoeForCausalLM",
    "phi2": "PhiForCausalLM",
}

LONG_FACTORS = [1.0 + 0.25 * i for i in range(8)]
SHORT_FACTORS = [1.0 + 0.01 * i for i in range(8)]
LONGROPE = {
    "max_position_embeddings": 131072,
    "rope_scaling": {
        "long_factor": LONG_FACTORS,
        "short_factor": SHORT_FACTORS,
        "type": "longrope",
    },
}
"""Phi-3.5-mini's long context: 8 factors for a rotary width of 16."""

_SCALES = {
    "attention_multiplier": 0.015625,
    "embedding_multiplier": 12.0,
    "residual_multiplier": 0.22,
    "logits_scaling": 8.0,
}


def _phi3_config(model: Model) -> dict[str, Any]:
    return {
        "embd_pdrop": 0.0,
        "original_max_position_embeddings": 4096,
        "resid_pdrop": 0.0,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "sliding_window": 2047,
    }


def _granite_config(model: Model) -> dict[str, Any]:
    out = {**_SCALES, "attention_bias": False, "mlp_bias": False, "rms_norm_eps": 1e-05}
    out["rope_theta"] = 10000000.0
    if model.kind == "granitemoe":
        out.update(num_local_experts=model.experts, num_experts_per_tok=2)
        if model.shared:
            out["shared_intermediate_size"] = model.shared
    return out


def _phi2_config(model: Model) -> dict[str, Any]:
    return {
        "hidden_act": "gelu_new",
        "layer_norm_eps": 1e-05,
        "partial_rotary_factor": 0.5,
        "qk_layernorm": False,
        "rope_theta": 10000.0,
    }


_CONFIGS: dict[str, Callable[[Model], dict[str, Any]]] = {
    "phi3": _phi3_config,
    "granite": _granite_config,
    "granitemoe": _granite_config,
    "phi2": _phi2_config,
}


def config_of(model: Model) -> dict[str, Any]:
    """config.json as the family's releases write it (`extra` last; ABSENT drops a key)."""
    config: dict[str, Any] = {
        "architectures": [HF_NAMES[model.kind]],
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
        "rope_scaling": None,
        "tie_word_embeddings": model.tied,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.0",
        "use_cache": True,
        "vocab_size": model.vocab,
    }
    config.update(_CONFIGS[model.kind](model))
    config.update(model.extra)
    return {key: value for key, value in config.items() if value is not ABSENT}


def _phi3_layer(model: Model) -> dict[str, tuple[int, ...]]:
    h, f, d = model.hidden, model.intermediate, model.dim
    return {
        "input_layernorm.weight": (h,),
        "mlp.down_proj.weight": (h, f),
        "mlp.gate_up_proj.weight": (2 * f, h),
        "post_attention_layernorm.weight": (h,),
        "self_attn.o_proj.weight": (h, model.heads * d),
        "self_attn.qkv_proj.weight": ((model.heads + 2 * model.kv_heads) * d, h),
    }


def _llama_attention(model: Model) -> dict[str, tuple[int, ...]]:
    h, d = model.hidden, model.dim
    return {
        "input_layernorm.weight": (h,),
        "post_attention_layernorm.weight": (h,),
        "self_attn.k_proj.weight": (model.kv_heads * d, h),
        "self_attn.o_proj.weight": (h, model.heads * d),
        "self_attn.q_proj.weight": (model.heads * d, h),
        "self_attn.v_proj.weight": (model.kv_heads * d, h),
    }


def _granite_layer(model: Model) -> dict[str, tuple[int, ...]]:
    h, f = model.hidden, model.intermediate
    out = _llama_attention(model)
    out.update({"mlp.down_proj.weight": (h, f), "mlp.gate_proj.weight": (f, h)})
    out["mlp.up_proj.weight"] = (f, h)
    return out


def _granitemoe_layer(model: Model) -> dict[str, tuple[int, ...]]:
    h, f, e = model.hidden, model.intermediate, model.experts
    out: dict[str, tuple[int, ...]] = {
        "block_sparse_moe.input_linear.weight": (e, 2 * f, h),
        "block_sparse_moe.output_linear.weight": (e, h, f),
        "block_sparse_moe.router.layer.weight": (e, h),
        **_llama_attention(model),
    }
    if model.shared:
        out["shared_mlp.input_linear.weight"] = (2 * model.shared, h)
        out["shared_mlp.output_linear.weight"] = (h, model.shared)
    return out


def _phi2_layer(model: Model) -> dict[str, tuple[int, ...]]:
    h, f = model.hidden, model.intermediate
    out: dict[str, tuple[int, ...]] = {}
    for name, rows, cols in (
        ("input_layernorm", h, 0),
        ("mlp.fc1", f, h),
        ("mlp.fc2", h, f),
        ("self_attn.dense", h, h),
        ("self_attn.k_proj", h, h),
        ("self_attn.q_proj", h, h),
        ("self_attn.v_proj", h, h),
    ):
        out[f"{name}.bias"] = (rows,)
        out[f"{name}.weight"] = (rows, cols) if cols else (rows,)
    return out


_LAYERS: dict[str, Callable[[Model], dict[str, tuple[int, ...]]]] = {
    "phi3": _phi3_layer,
    "granite": _granite_layer,
    "granitemoe": _granitemoe_layer,
    "phi2": _phi2_layer,
}


def tensor_shapes(model: Model) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors in the order transformers' safetensors files list them."""
    h = model.hidden
    out: dict[str, tuple[int, ...]] = {}
    if not model.tied:
        out["lm_head.weight"] = (model.vocab, h)
        if model.kind == "phi2":
            out["lm_head.bias"] = (model.vocab,)
    out["model.embed_tokens.weight"] = (model.vocab, h)
    if model.kind == "phi2":
        out.update({"model.final_layernorm.bias": (h,), "model.final_layernorm.weight": (h,)})
    for layer in range(model.layers):
        for name, dims in _LAYERS[model.kind](model).items():
            out[f"model.layers.{layer}.{name}"] = dims
    if model.kind != "phi2":
        out["model.norm.weight"] = (h,)
    return out


def random_weights(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random bfloat16 weights of the model's tensors (norms near 1)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in tensor_shapes(model).items():
        values = rng.standard_normal(dims, dtype=np.float32) * 0.05
        if "norm" in name and name.endswith("weight"):
            values += 1.0
        out[name] = values.astype(ml_dtypes.bfloat16)
    return out


def model_of(kind: str, **changes: Any) -> Model:
    """The fixture model of `kind` with `changes`."""
    return replace(Model(kind), **changes)


def write_model(folder: Path, model: Model) -> tuple[Path, dict[str, np.ndarray]]:
    """The model's folder (config.json, three safetensors shards, no tokenizer), its weights."""
    weights = random_weights(model)
    return write_checkpoint(folder, weights, config_of(model), shards=3), weights


PHI3_ADDED = [
    ("<|endoftext|>", True),
    ("<|assistant|>", True),
    ("<|user|>", False),  # not special: user-defined by Phi-3's rules, control by llama's
    ("\u2581spaced", False),  # the sentencepiece space stays (llama's rules undo it)
]
PHI3_PADDING = 4
"""Rows of the embedding past the added tokens (Phi-3's 32064 for 32011 tokens)."""


def write_phi3_tokenizer(folder: Path) -> int:
    """A sentencepiece tokenizer.model with Phi-3's added tokens after its pieces, listed in
    added_tokens.json and tokenizer_config.json's added_tokens_decoder as Phi-3's folders list
    them; returns the padded vocabulary size config.json gives."""
    pieces = write_sentencepiece_tokenizer(folder, 400)
    config_path = folder / "tokenizer_config.json"
    import json

    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    decoder = tokenizer_config["added_tokens_decoder"]
    for offset, (content, special) in enumerate(PHI3_ADDED):
        decoder[str(pieces + offset)] = {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": special,
            "single_word": False,
            "special": special,
        }
    tokenizer_config["eos_token"] = "<|endoftext|>"
    write_json(config_path, tokenizer_config)
    added = {content: pieces + i for i, (content, _) in enumerate(PHI3_ADDED)}
    write_json(folder / "added_tokens.json", added)
    return pieces + len(PHI3_ADDED) + PHI3_PADDING


def write_gpt2_tokenizer(folder: Path, vocab: int = 320) -> int:
    """Phi-4's kind: a byte-level BPE tokenizer.json whose tokenizer_config.json names
    GPT2Tokenizer; returns its vocabulary size."""
    import json

    size = write_bpe_tokenizer(folder, vocab, "llama3")
    config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    write_json(config_path, {**tokenizer_config, "tokenizer_class": "GPT2Tokenizer"})
    return size


def converted(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    """The GGUF tensors of `folder` as arrays (q8_0 as its blocks' bytes), in file order."""
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def gguf_file(folder: Path, out_type: str, pre: str | None = None) -> gguf.GGUFReader:
    """`folder` converted to a GGUF file of `out_type`, read back with gguf-py."""
    from lazyparams.targets.llamacpp.target import GGUFTarget

    dst = folder.parent / f"{folder.name}-{out_type}.gguf"
    lazyparams.convert(GGUFTarget(out_type, pre), folder, dst, progress=False)
    return gguf.GGUFReader(dst)


def fields_of(reader: gguf.GGUFReader) -> dict[str, Any]:
    """Every KV pair of a file, in file order, as Python values."""
    return {name: f.contents() for name, f in reader.fields.items() if not name.startswith("GGUF.")}
