"""The hyperparameters llama.cpp reads from config.json, as data, and the readers of them.

The keys, their config.json sources, their GGUF types and their order are those llama.cpp's
converter writes for the architectures in this package: the common text-model keys, rope
scaling, then the architecture's own (`metadata` writes them). Plain data and functions a plan
needs too (layer and head counts, rope settings); imports the errors and the tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.tables import HParam

LAYER_COUNT_KEYS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers")
HEAD_COUNT_KEYS = ("num_attention_heads", "n_head", "n_heads")
KV_HEAD_COUNT_KEYS = ("num_key_value_heads", "n_kv_heads")
HIDDEN_KEYS = ("hidden_size", "n_embd", "dim")

COMMON: tuple[HParam, ...] = (
    HParam("block_count", LAYER_COUNT_KEYS, required=True),
    HParam(
        "context_length",
        (
            "max_position_embeddings",
            "n_ctx",
            "n_positions",
            "max_length",
            "max_sequence_length",
            "model_max_length",
        ),
    ),
    HParam("embedding_length", HIDDEN_KEYS, required=True),
    HParam(
        "feed_forward_length",
        (
            "prefix_dense_intermediate_size",
            "dense_intermediate_size",
            "intermediate_size",
            "n_inner",
            "hidden_dim",
        ),
    ),
    HParam("attention.head_count", HEAD_COUNT_KEYS, required=True),
    HParam("attention.head_count_kv", KV_HEAD_COUNT_KEYS),
)
"""The hyperparameters every text model writes first, in llama.cpp's order."""

AFTER_ROPE: tuple[HParam, ...] = (
    HParam("attention.layer_norm_rms_epsilon", ("rms_norm_eps", "norm_eps"), "FLOAT32"),
    HParam(
        "attention.layer_norm_epsilon",
        ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"),
        "FLOAT32",
    ),
    HParam("expert_count", ("num_local_experts", "num_experts", "n_routed_experts")),
    HParam("expert_used_count", ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")),
    HParam("expert_group_count", ("n_group",)),
    HParam("expert_group_used_count", ("topk_group",)),
    HParam(
        "expert_gating_func",
        (
            "score_function",
            "scoring_func",
            "score_func",
            "moe_router_activation",
            "moe_router_activation_func",
            "expert_selection_fn",
        ),
        choices=(("softmax", 1), ("sigmoid", 2), ("sqrtsoftplus", 4)),
    ),
    HParam("attention.key_length", ("head_dim",)),
    HParam("attention.value_length", ("head_dim",)),
)
"""The hyperparameters after rope's, up to the file type."""

LOCAL_ROPE_THETA_KEYS = (
    "local_rope_theta",
    "rope_local_theta",
    "rope_theta_local",
    "swa_rope_theta",
    "rope_local_base_freq",
)

YARN_EXTRAS = (
    ("yarn_ext_factor", ("extrapolation_factor",)),
    ("yarn_attn_factor", ("attention_factor", "attn_factor")),
    ("yarn_beta_fast", ("beta_fast",)),
    ("yarn_beta_slow", ("beta_slow",)),
)


def text_model_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """config.json as llama.cpp's converter reads it for a text model: a multimodal
    checkpoint's `text_config` merged over its top level (the model class stays the top
    level's `architectures`)."""
    text = config.get("text_config")
    if not isinstance(text, Mapping):
        return config
    merged = {**config, **text}
    if "architectures" in config:
        merged["architectures"] = config["architectures"]
    return merged


def first_present(config: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of `keys` in `config`, or None."""
    return next((config[key] for key in keys if key in config), None)


def rope_parameters(config: Mapping[str, Any]) -> dict[str, Any]:
    """Rope settings as llama.cpp reads them: `rope_parameters` or `rope_scaling`, with the
    top-level theta and type mirrored in."""
    found = config.get("rope_parameters", config.get("rope_scaling")) or {}
    rope = dict(found) if isinstance(found, Mapping) else {}
    rope = dict(rope.get("full_attention", rope))
    theta = first_present(
        config,
        (
            "global_rope_theta",
            "rope_global_theta",
            "rope_theta_global",
            "rope_theta",
            "rotary_emb_base",
        ),
    )
    if "rope_theta" not in rope and theta is not None:
        rope["rope_theta"] = theta
    if "rope_type" not in rope and rope.get("type") is not None:
        rope["rope_type"] = rope["type"]
    return rope


def sliding_rope_theta(config: Mapping[str, Any]) -> Any:
    """The rotary base of sliding-window layers, as llama.cpp's converter reads it: the
    `sliding_attention` entry of the rope settings, else a local theta key when the rope
    settings are not split by layer type; None when the config has neither."""
    found = config.get("rope_parameters", config.get("rope_scaling")) or {}
    rope = found if isinstance(found, Mapping) else {}
    if "full_attention" in rope or "sliding_attention" in rope:
        sliding = rope.get("sliding_attention") or {}
        return sliding.get("rope_theta") if isinstance(sliding, Mapping) else None
    return first_present(config, LOCAL_ROPE_THETA_KEYS)


def head_dim(config: Mapping[str, Any], config_path: Path) -> int:
    """The per-head width: `head_dim`, else hidden size over head count."""
    if isinstance(config.get("head_dim"), int):
        return int(config["head_dim"])
    hidden = first_present(config, HIDDEN_KEYS)
    heads = first_present(config, HEAD_COUNT_KEYS)
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        raise ConvertError(f"{config_path}: expected integer hidden_size and num_attention_heads")
    return hidden // heads
