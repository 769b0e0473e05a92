"""glm4: Glm4ForCausalLM (GLM-4-0414, GLM-Z1).

q/k/v with biases and no rotary permutation (GLM's rotary half is already in NeoX order), four
RMS norms per layer (before and after attention, before and after the MLP), and the MLP's
`gate_up_proj` written whole as `ffn_up` (llama.cpp splits it when it runs). The shared
metadata is written from config.json read through transformers' Glm4Config (its defaults for
missing keys), then the partial rotary width. The vocabulary is byte-level BPE with GLM's
special tokens set by their text. Imports the tables, the llama table, gemma's helper, the
vocabulary and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.bpe_vocab import bpe_vocab
from lazyparams.targets.llamacpp.gemma import with_defaults
from lazyparams.targets.llamacpp.hparams import rope_parameters
from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.tables import Architecture, ConfigHook, TensorRule

DEFAULTS: Mapping[str, Any] = {
    "max_position_embeddings": 131072,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "rms_norm_eps": 1.5625e-07,
}
"""transformers' Glm4Config defaults for the keys the converter reads that config.json may
leave out (it reads config.json through that class)."""

_ROTARY_SHARE = 0.5
"""Glm4Config's partial_rotary_factor when config.json gives none."""

_with_defaults: ConfigHook = with_defaults(DEFAULTS)

_GLM4_SPECIALS = (
    ("eos", "<|endoftext|>"),
    ("eot", "<|user|>"),
    ("unk", "<|endoftext|>"),
    ("bos", "<|endoftext|>"),
)
"""The special tokens GLM-4's converter sets by their text, in its order (a kind the
tokenizer's own files already set keeps their id)."""


def glm4_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json with Glm4Config's defaults; a multimodal rope (`mrope_section`, GLM-4V's
    text model, whose q/k the converter reorders) is refused."""
    if "mrope_section" in rope_parameters(config):
        raise ConvertError(
            "config.json: the rope settings have 'mrope_section' (GLM-4V's multimodal rope); "
            "expected a Glm4ForCausalLM text model without it"
        )
    return _with_defaults(config)


def glm4_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The rotary width after the file type: head_dim (or hidden / heads) times the partial
    rotary factor."""
    dim = config.get("head_dim")
    if dim is None:
        hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
        if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
            raise ConvertError(
                f"{config_path}: expected integer hidden_size and num_attention_heads"
            )
        dim = hidden // heads
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ConvertError(f"{config_path}: expected an integer 'head_dim', got {dim!r}")
    share = rope_parameters(config).get(
        "partial_rotary_factor", config.get("partial_rotary_factor", _ROTARY_SHARE)
    )
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise ConvertError(
            f"{config_path}: expected a number 'partial_rotary_factor', got {share!r}"
        )
    yield "rope.dimension_count", "UINT32", int(dim * share)


def glm4_special_ids(tokenizer: Any, model_dir: Path) -> dict[str, int]:
    """The ids of GLM-4's special tokens, looked up by their text among the added tokens."""
    added = {
        token.content: token_id for token_id, token in tokenizer.get_added_tokens_decoder().items()
    }
    missing = sorted({text for _, text in _GLM4_SPECIALS if text not in added})
    if missing:
        raise ConvertError(
            f"{model_dir / 'tokenizer.json'}: GLM-4's special tokens {', '.join(missing)} are "
            "not among its added tokens; llama.cpp's glm4 needs them"
        )
    return {kind: added[text] for kind, text in _GLM4_SPECIALS}


def glm4_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """GLM-4's vocabulary: byte-level BPE, its special tokens set by their text."""
    bpe_vocab(writer, model_dir, config, pre, glm4_special_ids)


def _layer(hf: str, gguf: str, required: bool = True) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", required=required)


LAYER = (
    _layer("input_layernorm.weight", "attn_norm.weight"),
    *(_layer(f"self_attn.{p}_proj.weight", f"attn_{p}.weight") for p in "qkv"),
    # present with attention_bias (Glm4Config's default)
    *(_layer(f"self_attn.{p}_proj.bias", f"attn_{p}.bias", required=False) for p in "qkv"),
    _layer("self_attn.o_proj.weight", "attn_output.weight"),
    _layer("post_self_attn_layernorm.weight", "post_attention_norm.weight"),
    _layer("post_attention_layernorm.weight", "ffn_norm.weight"),
    _layer("post_mlp_layernorm.weight", "post_ffw_norm.weight"),
    _layer("mlp.gate_up_proj.weight", "ffn_up.weight"),
    _layer("mlp.down_proj.weight", "ffn_down.weight"),
)
"""A decoder layer; `post_attention_layernorm` is the MLP's input norm here, as gguf-py maps it."""

ARCH = Architecture(
    gguf_arch="glm4",
    hf_names=("Glm4ForCausalLM",),
    tensors=(*OUTER, *LAYER),
    config_hook=glm4_config,
    hparams_hook=glm4_hparams,
)
