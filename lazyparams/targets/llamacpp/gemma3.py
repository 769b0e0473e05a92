"""gemma3: Gemma3ForCausalLM (text). Gemma 2's layout with RMS norms over each head of q and k.

Every norm is written plus one. Unlike Gemma and Gemma 2, the converter writes the shared
hyperparameters (rope with a separate base for the sliding-window layers), then the final
logit soft-cap and the sliding window; config.json is read with the defaults and the rope
layout transformers' Gemma3TextConfig gives it (`gemma3_config`). A checkpoint with a
tokenizer.json and no tokenizer.model keeps only the embedding rows the tokenizer has tokens
for (`embeddings_in_vocab`). Imports the tables, the gemma tables and the errors; the
embedding hook also reads the folder's tokenizer.json.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.gemma import (
    ATTENTION,
    MLP,
    OUTPUT_NORM,
    config_number,
    layer_norm,
)
from lazyparams.targets.llamacpp.gemma2 import LAYER_NORMS
from lazyparams.targets.llamacpp.tables import Architecture, HookContext, TensorRule

_DEFAULTS = {
    "vocab_size": 262208,
    "max_position_embeddings": 131072,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-6,
    "head_dim": 256,
    "sliding_window": 4096,
}
"""transformers' Gemma3TextConfig defaults (the converter's own where it has one)."""

_GLOBAL_THETA = 1_000_000.0
_LOCAL_THETA = 10_000.0
_LAYER_KINDS = ("full_attention", "sliding_attention")


def gemma3_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as the converter reads it through Gemma3TextConfig: the defaults, the rope
    settings split into full- and sliding-attention layers (rope_scaling applying to the full
    ones; rope_theta and rope_local_base_freq their bases), and the sliding window a
    bidirectional model stores."""
    out = {**_DEFAULTS, **config}
    for key in ("rope_scaling", "rope_theta", "rope_local_base_freq"):
        out.pop(key, None)
    out["rope_parameters"] = _rope_layout(config)
    window = out.get("sliding_window")
    if out.get("use_bidirectional_attention") and isinstance(window, int):
        out["sliding_window"] = window // 2 * 2  # transformers halves it and doubles it back
    return out


def _rope_layout(config: Mapping[str, Any]) -> dict[str, Any]:
    """{"full_attention": {...}, "sliding_attention": {...}}, each with a type and a base."""
    given = config.get("rope_parameters")
    given = given if isinstance(given, Mapping) else {}
    layout = {k: dict(v) for k, v in given.items() if k in _LAYER_KINDS and isinstance(v, Mapping)}
    full = layout.setdefault("full_attention", {"rope_type": "default"})
    sliding = layout.setdefault("sliding_attention", {"rope_type": "default"})
    scaling = config.get("rope_scaling")
    if isinstance(scaling, Mapping):
        full.update(scaling)
    full.setdefault("rope_theta", config.get("rope_theta", _GLOBAL_THETA))
    sliding.setdefault("rope_theta", config.get("rope_local_base_freq", _LOCAL_THETA))
    for part in (full, sliding):
        part.setdefault("rope_type", part.get("type", "default"))
    return layout


def gemma3_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """After the shared keys: the final logit soft-cap (when set) and the sliding window
    (unless every layer is global), then the key-value head count again, in its place."""
    if config.get("attn_logit_softcapping") is not None:
        raise ConvertError(
            f"{config_path}: 'attn_logit_softcapping' is "
            f"{config['attn_logit_softcapping']!r}, but Gemma 3 has no attention soft-cap "
            "(llama.cpp's converter refuses it; expected null)"
        )
    if config.get("final_logit_softcapping"):
        value = config_number(config, "final_logit_softcapping", config_path, "FLOAT32")
        yield "final_logit_softcapping", "FLOAT32", value
    if config.get("sliding_window_pattern") != 1:
        yield "attention.sliding_window", "UINT32", _window(config, config_path)
    kv_heads = config_number(config, "num_key_value_heads", config_path, "UINT32")
    yield "attention.head_count_kv", "UINT32", kv_heads


def _window(config: Mapping[str, Any], config_path: Path) -> int:
    window: int = config_number(config, "sliding_window", config_path, "UINT32")
    return window


def embeddings_in_vocab(tensor: Any, context: HookContext) -> Any:
    """The embedding, cut to the tokenizer.json's tokens (its vocabulary plus its added
    tokens) when the folder has no tokenizer.model, as the converter cuts it. A folder with
    neither keeps every row (its GGUF file is refused for the missing tokenizer)."""
    folder = context.config_path.parent
    if (folder / "tokenizer.model").is_file() or not (folder / "tokenizer.json").is_file():
        return tensor
    tokens = _bpe_token_count(folder / "tokenizer.json")
    return tensor if tokens >= tensor.shape[0] else tensor[:tokens]


def _bpe_token_count(path: Path) -> int:
    """len(model.vocab) + len(added_tokens) of a tokenizer.json; errors name the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConvertError(f"{path}: not a readable JSON file ({exc})") from exc
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = data.get("added_tokens", []) if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not isinstance(added, list):
        raise ConvertError(
            f"{path}: expected a 'model' object with a 'vocab' object and an 'added_tokens' list"
        )
    return len(vocab) + len(added)


VISION = (
    "vision_tower.",
    "multi_modal_projector.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
)
"""A Gemma3ForConditionalGeneration checkpoint's vision tower and projector, left out: the
GGUF file holds its text model (llama.cpp writes the vision part as a separate projector)."""

HEAD_NORMS = (
    layer_norm("self_attn.q_norm.weight", "attn_q_norm.weight"),
    layer_norm("self_attn.k_norm.weight", "attn_k_norm.weight"),
)

ARCH = Architecture(
    gguf_arch="gemma3",
    hf_names=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    tensors=(
        TensorRule("model.embed_tokens.weight", "token_embd.weight", hook=embeddings_in_vocab),
        OUTPUT_NORM,
        TensorRule("lm_head.weight", "output.weight", required=False),
        *LAYER_NORMS,
        *HEAD_NORMS,
        *ATTENTION,
        *MLP,
    ),
    skipped_prefixes=VISION,
    config_hook=gemma3_config,
    hparams_hook=gemma3_hparams,
)
