"""phi2: PhiForCausalLM (Microsoft phi-1, phi-1.5, phi-2).

Separate q, k and v projections with biases and no rotary permutation, a `dense` output
projection, a two-layer GELU MLP (`fc1`, `fc2`), layer norms with biases and an output head
with a bias. The converter class writes its own hyperparameters in its own order: a
feed-forward length of 4 x hidden_size (whatever intermediate_size says), as many key-value
heads as heads, a partial rotary width, and `add_bos_token` false (the tokenizer's files may set
it again, in place). Config defaults are transformers' PhiConfig's, which the converter reads
config.json through. Imports the tables, the hyperparameter helpers and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import first_present, rope_parameters
from lazyparams.targets.llamacpp.tables import Architecture, TensorRule, layer_tensors

# transformers' PhiConfig defaults, which the converter sees for keys config.json lacks
_DEFAULT_CONTEXT = 2048
_DEFAULT_EPS = 1e-5
_DEFAULT_ROTARY_SHARE = 0.5


def _positive(config: Mapping[str, Any], keys: tuple[str, ...], path: Path, default: Any) -> int:
    """The first of `keys` in config.json (else `default`), checked to be a positive integer."""
    value = first_present(config, keys)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{path}: expected a positive integer {keys[0]!r}, got {value!r}")
    return value


def _number(value: Any, key: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{path}: expected a number {key!r}, got {value!r}")
    return float(value)


def rotary_share(config: Mapping[str, Any]) -> Any:
    """partial_rotary_factor as PhiConfig gives it: the rope settings', else the top-level
    one, else 0.5."""
    rope = rope_parameters(config)
    if "partial_rotary_factor" in rope:
        return rope["partial_rotary_factor"]
    return config.get("partial_rotary_factor", _DEFAULT_ROTARY_SHARE)


def phi2_hparams(
    config: Mapping[str, Any], path: Path, file_type: int
) -> Iterator[tuple[str, str, Any]]:
    """Every phi2 hyperparameter in the converter class's order, the file type among them."""
    hidden = _positive(config, ("hidden_size", "n_embd"), path, None)
    heads = _positive(config, ("num_attention_heads", "n_head"), path, None)
    context = _positive(config, ("n_positions", "max_position_embeddings"), path, _DEFAULT_CONTEXT)
    yield "phi2.context_length", "UINT32", context
    yield "phi2.embedding_length", "UINT32", hidden
    yield "phi2.feed_forward_length", "UINT32", 4 * hidden
    yield "phi2.block_count", "UINT32", _positive(config, ("num_hidden_layers",), path, None)
    yield "phi2.attention.head_count", "UINT32", heads
    yield "phi2.attention.head_count_kv", "UINT32", heads
    eps = first_present(config, ("layer_norm_epsilon", "layer_norm_eps"))
    eps = _number(_DEFAULT_EPS if eps is None else eps, "layer_norm_eps", path)
    yield "phi2.attention.layer_norm_epsilon", "FLOAT32", eps
    share = _number(rotary_share(config), "partial_rotary_factor", path)
    yield "phi2.rope.dimension_count", "UINT32", int(share * hidden) // heads
    yield "general.file_type", "UINT32", file_type
    yield "tokenizer.ggml.add_bos_token", "BOOL", False


def phi2_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """One key-value head per head, as the converter writes phi2 (and the checks read it)."""
    return {**config, "num_key_value_heads": first_present(config, ("num_attention_heads",))}


def _both(hf: str, gguf: str) -> tuple[tuple[str, str, str], ...]:
    return ((f"{hf}.weight", f"{gguf}.weight", ""), (f"{hf}.bias", f"{gguf}.bias", ""))


LAYER = (
    *_both("input_layernorm", "attn_norm"),
    *_both("self_attn.q_proj", "attn_q"),
    *_both("self_attn.k_proj", "attn_k"),
    *_both("self_attn.v_proj", "attn_v"),
    *_both("self_attn.dense", "attn_output"),
    *_both("mlp.fc1", "ffn_up"),
    *_both("mlp.fc2", "ffn_down"),
)

OUTER = (
    TensorRule("model.embed_tokens.weight", "token_embd.weight"),
    TensorRule("model.final_layernorm.weight", "output_norm.weight"),
    TensorRule("model.final_layernorm.bias", "output_norm.bias"),
    TensorRule("lm_head.weight", "output.weight"),
    TensorRule("lm_head.bias", "output.bias"),
)

ARCH = Architecture(
    gguf_arch="phi2",
    hf_names=("PhiForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", LAYER)),
    config_hook=phi2_config,
    hparams_writer=phi2_hparams,
)
