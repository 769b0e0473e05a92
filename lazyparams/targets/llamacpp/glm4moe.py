"""glm4moe: Glm4MoeForCausalLM (GLM-4.5, GLM-4.5-Air, GLM-4.6).

Attention with q/k/v biases and optional per-head q/k norms, no rotary permutation (GLM's
rotary half is already in NeoX order); a dense lead of `first_k_dense_replace` layers, then
routed experts (stacked down, gate, up), shared experts, an F32 sigmoid router and its
score-correction bias. The converter keeps the multi-token-prediction layers past
`num_hidden_layers` (counted in `block_count`, written when the checkpoint holds them, with
their `nextn.*` tensors). The vocabulary is byte-level BPE with GLM's special tokens set by
name. Imports the tables, the llama and deepseek2 tables, the vocabulary and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.bpe_vocab import bpe_vocab
from lazyparams.targets.llamacpp.deepseek2 import moe_after_dense_lead
from lazyparams.targets.llamacpp.hparams import LAYER_COUNT_KEYS, first_present, rope_parameters
from lazyparams.targets.llamacpp.llama import DENSE_MLP, OUTER
from lazyparams.targets.llamacpp.tables import (
    DENSE,
    MOE,
    Architecture,
    ExpertRule,
    TensorRule,
)

CONFIG_DEFAULTS: Mapping[str, Any] = {
    "num_nextn_predict_layers": 1,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 1.0,
    "norm_topk_prob": True,
    "n_group": 1,
    "topk_group": 1,
}
"""Keys transformers' Glm4MoeConfig gives when config.json has none: the converter reads the
config through it, so it writes these."""

_PARTIAL_ROTARY = 0.5
_GLM_SPECIALS = {
    "bos": "[gMASK]",
    "eot": "<|user|>",
    "unk": "<|endoftext|>",
    "eom": "<|observation|>",
}
"""The special tokens GLM's converter sets by their text (its end-of-text is not GLM's EOT)."""


def _config_int(config: Mapping[str, Any], key: str, config_path: Path) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConvertError(f"{config_path}: expected a non-negative integer {key!r}, got {value!r}")
    return value


def with_glm_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as transformers' Glm4MoeConfig loads it, which is how the converter reads it."""
    return {**config, **{k: v for k, v in CONFIG_DEFAULTS.items() if config.get(k) is None}}


def moe_after_glm_lead(config: Mapping[str, Any], layers: int, config_path: Path) -> frozenset[int]:
    """The layers from `first_k_dense_replace` (1 when config.json has none) on hold experts,
    the multi-token-prediction layers included."""
    return moe_after_dense_lead(with_glm_defaults(config), layers, config_path)


def nextn_layers(config: Mapping[str, Any], config_path: Path) -> int:
    """The multi-token-prediction layers past `num_hidden_layers`, which the converter keeps."""
    return _config_int(with_glm_defaults(config), "num_nextn_predict_layers", config_path)


def glm4moe_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The block count with the prediction layers, the partial rotary width, the experts and
    their sigmoid gating, in the converter's order."""
    layers = first_present(config, LAYER_COUNT_KEYS)
    nextn = nextn_layers(config, config_path)
    if isinstance(layers, int):
        yield "block_count", "UINT32", layers + nextn
    yield "rope.dimension_count", "UINT32", _rope_width(config, config_path)
    for key, gguf_key in (
        ("n_routed_experts", "expert_count"),
        ("moe_intermediate_size", "expert_feed_forward_length"),
        ("n_shared_experts", "expert_shared_count"),
        ("first_k_dense_replace", "leading_dense_block_count"),
    ):
        if config.get(key) is not None:
            yield gguf_key, "UINT32", _config_int(config, key, config_path)
    yield "expert_gating_func", "UINT32", 2  # sigmoid
    scale = config.get("routed_scaling_factor")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise ConvertError(
                f"{config_path}: expected a number 'routed_scaling_factor', got {scale!r}"
            )
        yield "expert_weights_scale", "FLOAT32", scale
    if config.get("norm_topk_prob") is not None:
        yield "expert_weights_norm", "BOOL", bool(config["norm_topk_prob"])
    yield "nextn_predict_layers", "UINT32", nextn


def _rope_width(config: Mapping[str, Any], config_path: Path) -> int:
    """The rotary part of a head: head_dim (or hidden / heads) times the partial factor."""
    dim = config.get("head_dim")
    if dim is None:
        hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
        if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
            raise ConvertError(
                f"{config_path}: expected integer hidden_size and num_attention_heads"
            )
        dim = hidden // heads
    factor = rope_parameters(config).get(
        "partial_rotary_factor", config.get("partial_rotary_factor", _PARTIAL_ROTARY)
    )
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise ConvertError(f"{config_path}: expected a number 'partial_rotary_factor'")
    return int(int(dim) * factor)


def glm_special_ids(tokenizer: Any, model_dir: Path) -> dict[str, int]:
    """The ids of GLM's special tokens, looked up by their text among the added tokens."""
    added = {
        token.content: token_id for token_id, token in tokenizer.get_added_tokens_decoder().items()
    }
    missing = [text for text in _GLM_SPECIALS.values() if text not in added]
    if missing:
        raise ConvertError(
            f"{model_dir / 'tokenizer.json'}: GLM's special tokens {', '.join(missing)} are not "
            "among its added tokens; llama.cpp's glm4moe needs them"
        )
    return {kind: added[text] for kind, text in _GLM_SPECIALS.items()}


def glm_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """GLM's vocabulary: byte-level BPE, its special tokens set by name."""
    bpe_vocab(writer, model_dir, config, pre, glm_special_ids)


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ATTENTION = (
    _layer("input_layernorm.weight", "attn_norm.weight"),
    *(_layer(f"self_attn.{p}_proj.weight", f"attn_{p}.weight") for p in "qkv"),
    *(_layer(f"self_attn.{p}_proj.bias", f"attn_{p}.bias", required=False) for p in "qkv"),
    _layer("self_attn.o_proj.weight", "attn_output.weight"),
    _layer("self_attn.q_norm.weight", "attn_q_norm.weight", required=False),
    _layer("self_attn.k_norm.weight", "attn_k_norm.weight", required=False),
    _layer("post_attention_layernorm.weight", "post_attention_norm.weight"),
)

FEED_FORWARD = (
    *(_layer(hf, gguf, layers=DENSE) for hf, gguf, _ in DENSE_MLP),
    _layer("mlp.gate.weight", "ffn_gate_inp.weight", keep_f32=True, layers=MOE),
    _layer("mlp.gate.e_score_correction_bias", "exp_probs_b.bias", required=False, layers=MOE),
    *(
        _layer(
            f"mlp.shared_experts.{p}_proj.weight",
            f"ffn_{p}_shexp.weight",
            required=False,  # n_shared_experts may be 0
            layers=MOE,
        )
        for p in ("gate", "up", "down")
    ),
)

NEXTN = tuple(
    _layer(f"{hf}.weight", f"nextn.{gguf}.weight", required=False)
    for hf, gguf in (
        ("eh_proj", "eh_proj"),
        ("embed_tokens", "embed_tokens"),
        ("enorm", "enorm"),
        ("hnorm", "hnorm"),
        ("shared_head.head", "shared_head_head"),
        ("shared_head.norm", "shared_head_norm"),
    )
)
"""A multi-token-prediction layer's own tensors, besides a decoder layer's."""

EXPERTS = tuple(
    ExpertRule(
        f"model.layers.{{bid}}.mlp.experts.{{xid}}.{p}_proj.weight",
        f"blk.{{bid}}.ffn_{p}_exps.weight",
    )
    for p in ("down", "gate", "up")  # the order the converter writes them in
)

ARCH = Architecture(
    gguf_arch="glm4moe",
    hf_names=("Glm4MoeForCausalLM",),
    tensors=(*OUTER, *ATTENTION, *FEED_FORWARD, *NEXTN),
    experts=EXPERTS,
    expert_count_keys=("n_routed_experts",),
    config_hook=with_glm_defaults,
    hparams_hook=glm4moe_hparams,
    moe_layers=moe_after_glm_lead,
    extra_layers=nextn_layers,
)
