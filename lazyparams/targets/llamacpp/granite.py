"""granite: GraniteForCausalLM (IBM Granite 3.x dense).

Llama's tensors and rotary permutation under llama.cpp's own architecture name; the converter's
Granite class is its llama class plus four scales: attention (`attention_multiplier`), embedding
(`embedding_multiplier`), residual (`residual_multiplier`) and logits (`logits_scaling`), each
written when it is not zero. It ignores `head_dim` (no key or value length; the rotary width is
hidden_size / num_attention_heads). Config defaults are transformers' GraniteConfig's, which the
converter reads config.json through. A llama 3 rope is refused (llama.cpp's granite has no
frequency factors). Imports the tables, the llama table, the hyperparameter helpers and the
errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import rope_parameters
from lazyparams.targets.llamacpp.llama import DENSE_MLP, LAYER_RULES, OPTIONAL_BIASES, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

# transformers' GraniteConfig (and GraniteMoeConfig) defaults for keys config.json may lack
_DEFAULTS: dict[str, Any] = {
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "embedding_multiplier": 1.0,
    "logits_scaling": 1.0,
    "residual_multiplier": 1.0,
    "attention_multiplier": 1.0,
}
_DEFAULT_THETA = 10000.0

SCALES = (
    ("attention.scale", "attention_multiplier"),
    ("embedding_scale", "embedding_multiplier"),
    ("residual_scale", "residual_multiplier"),
    ("logit_scale", "logits_scaling"),
)
"""(GGUF key, config key) of Granite's multipliers, in the converter's order."""


def granite_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as the converter reads it: GraniteConfig's defaults filled in, one
    key-value head per head when not given, rope theta 10000 when not given, head_dim dropped."""
    out = {**_DEFAULTS, **config}
    out.pop("head_dim", None)
    if out.get("num_key_value_heads") is None and "num_attention_heads" in out:
        out["num_key_value_heads"] = out["num_attention_heads"]
    rope = out.get("rope_parameters") or out.get("rope_scaling")
    theta_in_rope = isinstance(rope, Mapping) and "rope_theta" in rope
    if not theta_in_rope:
        out.setdefault("rope_theta", _DEFAULT_THETA)
    return out


def granite_scales(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The four multipliers as llama.cpp's scales, each where it is not zero. A llama 3 rope
    is refused: its frequency factors are a tensor llama.cpp's granite does not have (the
    converter fails on it too)."""
    kind = str(rope_parameters(config).get("rope_type", "")).lower()
    if kind == "llama3":
        raise ConvertError(
            f"{config_path}: rope type 'llama3' needs rope frequency factors, which llama.cpp's "
            "granite architecture has no tensor for"
        )
    for key, source in SCALES:
        value = config.get(source)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConvertError(f"{config_path}: expected a number {source!r}, got {value!r}")
        if value:
            yield key, "FLOAT32", value


ARCH = Architecture(
    gguf_arch="granite",
    hf_names=("GraniteForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", LAYER_RULES + DENSE_MLP), *OPTIONAL_BIASES),
    extra_hparams=("vocab_size", "rope.dimension_count"),
    config_hook=granite_config,
    hparams_hook=granite_scales,
)
