"""gemma2: Gemma2ForCausalLM. Gemma with a norm after attention and around the feed-forward.

Four norms per layer, all written plus one; the converter writes Gemma's hyperparameters, then
after the file type the attention and final logit soft-caps and the sliding window. Imports the
tables and the gemma table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.targets.llamacpp.gemma import (
    ATTENTION,
    EMBEDDINGS,
    GEMMA_KEYS,
    MLP,
    OUTPUT_NORM,
    SKIPPED,
    hparams_of,
    layer_norm,
    with_defaults,
)
from lazyparams.targets.llamacpp.tables import Architecture

LAYER_NORMS = (
    layer_norm("input_layernorm.weight", "attn_norm.weight"),
    layer_norm("post_attention_layernorm.weight", "post_attention_norm.weight"),
    layer_norm("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
    layer_norm("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
)
"""Gemma 2's (and Gemma 3's) norms: before and after attention, before and after the MLP."""

_DEFAULTS = {
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "head_dim": 256,
    "num_key_value_heads": 4,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "sliding_window": 4096,
}
"""transformers' Gemma2Config defaults for the keys the converter reads."""

_AFTER_FILE_TYPE = (
    ("attn_logit_softcapping", "attn_logit_softcapping", "FLOAT32"),
    ("final_logit_softcapping", "final_logit_softcapping", "FLOAT32"),
    ("attention.sliding_window", "sliding_window", "UINT32"),
)


def gemma2_hparams(
    config: Mapping[str, Any], config_path: Path, file_type: int
) -> Iterator[tuple[str, str, Any]]:
    """Gemma's keys, the file type, then the soft-caps and the sliding window."""
    yield from hparams_of("gemma2", GEMMA_KEYS, config, config_path)
    yield "general.file_type", "UINT32", file_type
    yield from hparams_of("gemma2", _AFTER_FILE_TYPE, config, config_path)


ARCH = Architecture(
    gguf_arch="gemma2",
    hf_names=("Gemma2ForCausalLM",),
    tensors=(EMBEDDINGS, OUTPUT_NORM, *LAYER_NORMS, *ATTENTION, *MLP),
    skipped=SKIPPED,
    config_hook=with_defaults(_DEFAULTS),
    hparams_writer=gemma2_hparams,
)
