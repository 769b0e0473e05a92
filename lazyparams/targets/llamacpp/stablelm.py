"""stablelm: StableLmForCausalLM (StableLM 2, StableLM 3B 4E1T, StableCode).

Llama's attention and gated MLP without the rotary permutation (llama.cpp runs StableLM with
Hugging Face's NeoX rotary layout), q/k/v biases where `use_qkv_bias` is set, LayerNorms with
biases (the final one too). The converter class writes its own hyperparameters in its own
order: a partial rotary width, `use_parallel_residual` and the LayerNorm epsilon, from
config.json read through transformers' StableLmConfig (its defaults for missing keys).
Checkpoints with per-head q/k LayerNorms (`qk_layernorm`, StableLM 2 12B) are refused: the
converter cannot write them either. Imports the tables, the llama table, gemma's helpers,
the hyperparameter helpers and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.gemma import hparams_of, with_defaults
from lazyparams.targets.llamacpp.hparams import rope_parameters
from lazyparams.targets.llamacpp.llama import DENSE_MLP, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, ConfigHook, TensorRule, layer_tensors

DEFAULTS: Mapping[str, Any] = {
    "max_position_embeddings": 4096,
    "hidden_size": 2560,
    "num_hidden_layers": 32,
    "intermediate_size": 6912,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "layer_norm_eps": 1e-05,
    "use_parallel_residual": False,
    "qk_layernorm": False,
}
"""transformers' StableLmConfig defaults for the keys the converter reads (it reads
config.json through that class)."""

_ROTARY_SHARE = 0.25
"""StableLmConfig's partial_rotary_factor when config.json gives none."""

_with_defaults: ConfigHook = with_defaults(DEFAULTS)

KEYS = (
    ("context_length", "max_position_embeddings", "UINT32"),
    ("embedding_length", "hidden_size", "UINT32"),
    ("block_count", "num_hidden_layers", "UINT32"),
    ("feed_forward_length", "intermediate_size", "UINT32"),
)
"""(key, config.json key, GGUF type) of the keys written before the rotary width."""

HEAD_KEYS = (
    ("attention.head_count", "num_attention_heads", "UINT32"),
    ("attention.head_count_kv", "num_key_value_heads", "UINT32"),
)


def _rotary_width(config: Mapping[str, Any], config_path: Path) -> int:
    """partial_rotary_factor (rope settings', else top-level, else 0.25) x the head width."""
    share = rope_parameters(config).get(
        "partial_rotary_factor", config.get("partial_rotary_factor", _ROTARY_SHARE)
    )
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise ConvertError(
            f"{config_path}: expected a number 'partial_rotary_factor', got {share!r}"
        )
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        raise ConvertError(f"{config_path}: expected integer hidden_size and num_attention_heads")
    return int(share * (hidden // heads))


def stablelm_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json with StableLmConfig's defaults, as the converter reads it; a config with
    `qk_layernorm` is refused here, before any tensor is planned."""
    if config.get("qk_layernorm"):
        raise ConvertError(
            "config.json: 'qk_layernorm' is set: StableLM's per-head q/k LayerNorms "
            "(self_attn.q_layernorm.norms.*, k_layernorm.norms.*) are not supported by the gguf "
            "recipe (llama.cpp's converter cannot write them either); expected 'qk_layernorm' "
            "false"
        )
    return _with_defaults(config)


def stablelm_hparams(
    config: Mapping[str, Any], config_path: Path, file_type: int
) -> Iterator[tuple[str, str, Any]]:
    """Every stablelm hyperparameter and the file type, in the converter class's order."""
    yield from hparams_of("stablelm", KEYS, config, config_path)
    yield "stablelm.rope.dimension_count", "UINT32", _rotary_width(config, config_path)
    yield from hparams_of("stablelm", HEAD_KEYS, config, config_path)
    yield "stablelm.use_parallel_residual", "BOOL", bool(config.get("use_parallel_residual"))
    yield from hparams_of(
        "stablelm",
        (("attention.layer_norm_epsilon", "layer_norm_eps", "FLOAT32"),),
        config,
        config_path,
    )
    yield "general.file_type", "UINT32", file_type


def _layer(hf: str, gguf: str, required: bool = True) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", required=required)


LAYER = (
    *(_layer(f"input_layernorm.{p}", f"attn_norm.{p}") for p in ("weight", "bias")),
    *(_layer(f"self_attn.{p}_proj.weight", f"attn_{p}.weight") for p in "qkv"),
    *(_layer(f"self_attn.{p}_proj.bias", f"attn_{p}.bias", required=False) for p in "qkv"),
    _layer("self_attn.o_proj.weight", "attn_output.weight"),
    # absent with use_parallel_residual: attention and MLP then share the input norm
    *(
        _layer(f"post_attention_layernorm.{p}", f"ffn_norm.{p}", required=False)
        for p in ("weight", "bias")
    ),
    *layer_tensors("model.layers", DENSE_MLP),
)
"""A decoder layer: LayerNorms with biases, q/k/v with biases where `use_qkv_bias` is set."""

ARCH = Architecture(
    gguf_arch="stablelm",
    hf_names=("StableLmForCausalLM",),
    tensors=(*OUTER, TensorRule("model.norm.bias", "output_norm.bias"), *LAYER),
    config_hook=stablelm_config,
    hparams_writer=stablelm_hparams,
)
