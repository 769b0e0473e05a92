"""olmo2: Olmo2ForCausalLM. Llama's attention and MLP without the rotary permutation (llama.cpp
runs OLMo 2 with Hugging Face's rotary layout), normalized after each block instead of before
it (`post_attention_norm`, `post_ffw_norm`, no input norm), with an RMS norm over all of q and
of k (`attn_q_norm`, `attn_k_norm`, each as wide as its projection's rows). A config with a
`sliding_window` also writes the window and which layers use it, as llama.cpp's converter does.
Imports the tables, the llama table and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import DENSE_MLP, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

ATTENTION = (
    ("self_attn.q_proj.weight", "attn_q.weight", ""),
    ("self_attn.k_proj.weight", "attn_k.weight", ""),
    ("self_attn.v_proj.weight", "attn_v.weight", ""),
    ("self_attn.o_proj.weight", "attn_output.weight", ""),
    ("self_attn.q_norm.weight", "attn_q_norm.weight", ""),
    ("self_attn.k_norm.weight", "attn_k_norm.weight", ""),
)

POST_NORMS = (
    ("post_attention_layernorm.weight", "post_attention_norm.weight", ""),
    ("post_feedforward_layernorm.weight", "post_ffw_norm.weight", ""),
)

_SLIDING = "sliding_attention"


def sliding_window_hparams(
    config: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, str, Any]]:
    """The sliding window and, per layer, whether it slides: from `layer_types` where the
    config lists them, else every layer but each fourth (the converter's default)."""
    if "sliding_window" not in config:
        return
    window = config["sliding_window"]
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConvertError(
            f"{config_path}: expected a non-negative integer 'sliding_window', got {window!r}"
        )
    yield "attention.sliding_window", "UINT32", window
    layers = config.get("num_hidden_layers")
    types = config.get("layer_types")
    if types is None:
        pattern = [(i + 1) % 4 != 0 for i in range(layers if isinstance(layers, int) else 0)]
    elif isinstance(types, list) and all(isinstance(t, str) for t in types):
        pattern = [t == _SLIDING for t in types]
    else:
        raise ConvertError(
            f"{config_path}: expected 'layer_types' to list one attention kind per layer, "
            f"got {types!r}"
        )
    if pattern:
        yield "attention.sliding_window_pattern", "ARRAY", pattern


ARCH = Architecture(
    gguf_arch="olmo2",
    hf_names=("Olmo2ForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", ATTENTION + DENSE_MLP + POST_NORMS)),
    hparams_hook=sliding_window_hparams,
)
