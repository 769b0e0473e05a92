"""command-r: CohereForCausalLM (Command R, Command R+, Aya 23). Llama's attention and MLP in
one parallel block under a single LayerNorm (weights only), no rotary permutation, optional
per-head q/k norms (Command R+), the output tied to the embeddings (llama.cpp's command-r has
no output tensor, so an `lm_head` is refused by name). The context length is `model_max_length`
where the config has one (Cohere's `max_position_embeddings` understates it); the logit scale
and an explicit "none" rope scaling follow the file type. Imports the tables, the llama table
and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import DENSE_MLP
from lazyparams.targets.llamacpp.tables import Architecture, TensorRule, layer_tensors

EMBEDDINGS = (
    TensorRule("model.embed_tokens.weight", "token_embd.weight"),
    TensorRule("model.norm.weight", "output_norm.weight"),
)
"""Tensors outside the layers: the embeddings (also the output) and the final norm."""

ATTENTION = (
    ("input_layernorm.weight", "attn_norm.weight", ""),
    ("self_attn.q_proj.weight", "attn_q.weight", ""),
    ("self_attn.k_proj.weight", "attn_k.weight", ""),
    ("self_attn.v_proj.weight", "attn_v.weight", ""),
    ("self_attn.o_proj.weight", "attn_output.weight", ""),
)

HEAD_NORMS = tuple(
    TensorRule(
        f"model.layers.{{bid}}.self_attn.{p}_norm.weight",
        f"blk.{{bid}}.attn_{p}_norm.weight",
        required=False,
    )
    for p in ("q", "k")
)
"""Command R+'s per-head q/k LayerNorm weights (heads x head width), absent without use_qk_norm."""

BIASES = tuple(
    TensorRule(
        f"model.layers.{{bid}}.self_attn.{p}_proj.bias",
        f"blk.{{bid}}.attn_{g}.bias",
        required=False,
    )
    for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
)
"""The attention biases of a config with attention_bias, written as the converter maps them."""


def number(config: Mapping[str, Any], key: str, config_path: Path) -> float:
    """config[key] checked to be a number (not a bool): the converter requires the key."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{config_path}: expected a number {key!r}, got {value!r}")
    return value


def with_trained_context(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as the converter rewrites it: the context length from `model_max_length`
    when there is one."""
    if config.get("model_max_length") is None:
        return dict(config)
    return {**config, "max_position_embeddings": config["model_max_length"]}


def command_r_hparams(
    config: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, str, Any]]:
    """The logit scale, then rope scaling "none" (overwriting any scaling written before)."""
    yield "logit_scale", "FLOAT32", number(config, "logit_scale", config_path)
    yield "rope.scaling.type", "STRING", "none"


ARCH = Architecture(
    gguf_arch="command-r",
    hf_names=("CohereForCausalLM",),
    tensors=(
        *EMBEDDINGS,
        *layer_tensors("model.layers", ATTENTION + DENSE_MLP),
        *HEAD_NORMS,
        *BIASES,
    ),
    config_hook=with_trained_context,
    hparams_hook=command_r_hparams,
)
