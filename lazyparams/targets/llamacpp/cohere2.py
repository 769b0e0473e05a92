"""cohere2: Cohere2ForCausalLM (Command R7B, Command A). Command R's parallel block and tied
output without per-head norms, sliding-window attention on most layers (llama.cpp fixes which,
the converter writes only the window), a rotary width of `rotary_pct` of each head. llama.cpp's
cohere2 has no attention biases: the converter drops them when they are all zero, which a plan
cannot know before reading them, so a checkpoint holding them is refused by name. Imports the
tables, the llama and command-r tables and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.command_r import ATTENTION, EMBEDDINGS, number
from lazyparams.targets.llamacpp.llama import DENSE_MLP
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors


def _positive_int(config: Mapping[str, Any], key: str, config_path: Path) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{config_path}: expected a positive integer {key!r}, got {value!r}")
    return value


def with_head_dim(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as transformers' Cohere2Config loads it (how the converter reads it):
    `head_dim` is hidden_size / num_attention_heads where the file has none, so the attention
    key and value lengths are written."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if config.get("head_dim") is not None or not isinstance(hidden, int):
        return dict(config)
    if not isinstance(heads, int) or heads <= 0:
        return dict(config)  # the hyperparameter checks name what is wrong
    return {**config, "head_dim": hidden // heads}


def cohere2_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The logit scale, the sliding window, the vocabulary size, the rotary width (`rotary_pct`
    of hidden_size / num_attention_heads, not of head_dim) and rope scaling "none"."""
    yield "logit_scale", "FLOAT32", number(config, "logit_scale", config_path)
    yield "attention.sliding_window", "UINT32", _positive_int(config, "sliding_window", config_path)
    yield "vocab_size", "UINT32", _positive_int(config, "vocab_size", config_path)
    width = _positive_int(config, "hidden_size", config_path) // _positive_int(
        config, "num_attention_heads", config_path
    )
    yield "rope.dimension_count", "UINT32", int(number(config, "rotary_pct", config_path) * width)
    yield "rope.scaling.type", "STRING", "none"


ARCH = Architecture(
    gguf_arch="cohere2",
    hf_names=("Cohere2ForCausalLM",),
    tensors=(*EMBEDDINGS, *layer_tensors("model.layers", ATTENTION + DENSE_MLP)),
    config_hook=with_head_dim,
    hparams_hook=cohere2_hparams,
)
