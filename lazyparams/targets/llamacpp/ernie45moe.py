"""ernie4_5-moe: Ernie4_5_MoeForCausalLM (ERNIE-4.5-21B-A3B, ERNIE-4.5-300B-A47B).

Llama's attention without the rotary permutation (optional biases); the layers from
`moe_layer_start_index` to `moe_layer_end_index`, every `moe_layer_interval`-th, hold routed
experts (stacked gate, up, down), shared experts, an F32 router and the router's
score-correction bias (`moe_statics`); the others a dense MLP. Multi-token-prediction tensors
(`mtp_*`) are left out, as the converter leaves them. The vocabulary is sentencepiece, with
tokenizer_config.json's `add_prefix_space` after it. Imports the tables, the llama table, the
vocabulary and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import DENSE_MLP, LAYER_RULES, OUTER
from lazyparams.targets.llamacpp.spm_vocab import sentencepiece_vocab
from lazyparams.targets.llamacpp.tables import (
    DENSE,
    MOE,
    Architecture,
    ExpertRule,
    TensorRule,
    layer_tensors,
)
from lazyparams.targets.llamacpp.tokenizer_files import read_json

CONFIG_DEFAULTS: Mapping[str, Any] = {
    "moe_k": 6,
    "moe_num_experts": 64,
    "moe_num_shared_experts": 2,
    "moe_layer_start_index": 1,
    "moe_layer_interval": 1,
}
"""Keys transformers' Ernie4_5_MoeConfig gives when config.json has none (the converter reads
the config through it)."""


def _config_int(config: Mapping[str, Any], key: str, config_path: Path, positive: bool) -> int:
    value = config.get(key)
    low = 1 if positive else 0
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "positive" if positive else "non-negative"
        raise ConvertError(f"{config_path}: expected a {kind} integer {key!r}, got {value!r}")
    return value


def with_ernie_defaults(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as transformers' Ernie4_5_MoeConfig loads it."""
    return {**config, **{k: v for k, v in CONFIG_DEFAULTS.items() if config.get(k) is None}}


def ernie_moe_layers(config: Mapping[str, Any], layers: int, config_path: Path) -> frozenset[int]:
    """Every `moe_layer_interval`-th layer from `moe_layer_start_index` to
    `moe_layer_end_index` (the last layer when config.json has none) holds experts."""
    config = with_ernie_defaults(config)
    step = _config_int(config, "moe_layer_interval", config_path, positive=True)
    start = _config_int(config, "moe_layer_start_index", config_path, positive=False)
    end = config.get("moe_layer_end_index")
    last = (
        layers - 1
        if end is None
        else _config_int(config, "moe_layer_end_index", config_path, False)
    )
    return frozenset(i for i in range(start, min(last, layers - 1) + 1) if (i + 1) % step == 0)


def ernie_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The experts' counts, the layer pattern and the widths, in the converter's order."""
    for key, gguf_key, positive in (
        ("moe_num_experts", "expert_count", True),
        ("moe_k", "expert_used_count", True),
        ("moe_layer_interval", "interleave_moe_layer_step", True),
        ("moe_layer_start_index", "leading_dense_block_count", False),
    ):
        yield gguf_key, "UINT32", _config_int(config, key, config_path, positive)
    if config.get("moe_intermediate_size") is not None:
        width = _config_int(config, "moe_intermediate_size", config_path, positive=True)
        yield "expert_feed_forward_length", "UINT32", width
    shared = _config_int(config, "moe_num_shared_experts", config_path, positive=False)
    yield "expert_shared_count", "UINT32", shared
    ffn, kv_heads = config.get("intermediate_size"), config.get("num_key_value_heads")
    if shared > 0 and ffn is not None and kv_heads is not None:
        # the converter's own formula for the shared experts' width
        ffn = _config_int(config, "intermediate_size", config_path, positive=True)
        kv_heads = _config_int(config, "num_key_value_heads", config_path, positive=True)
        yield "expert_shared_feed_forward_length", "UINT32", ffn // kv_heads


def ernie_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """Sentencepiece, then tokenizer_config.json's `add_prefix_space` where it has the key."""
    sentencepiece_vocab(writer, model_dir, config, pre)
    tokenizer_config = read_json(model_dir / "tokenizer_config.json")
    if "add_prefix_space" in tokenizer_config:
        writer.add_add_space_prefix(bool(tokenizer_config["add_prefix_space"]))


MTP_PREFIXES = (
    "model.mtp_block.",
    "model.mtp_emb_norm.",
    "model.mtp_hidden_norm.",
    "model.mtp_linear_proj.",
)
"""The multi-token-prediction tensors, which the converter leaves out."""


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ATTENTION = layer_tensors("model.layers", tuple((hf, gguf, "") for hf, gguf, _ in LAYER_RULES))
BIASES = tuple(
    _layer(f"self_attn.{p}_proj.bias", f"attn_{g}.bias", required=False)
    for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
)

FEED_FORWARD = (
    *(_layer(hf, gguf, layers=DENSE) for hf, gguf, _ in DENSE_MLP),
    _layer("mlp.gate.weight", "ffn_gate_inp.weight", keep_f32=True, layers=MOE),
    _layer(
        "mlp.moe_statics.e_score_correction_bias", "exp_probs_b.bias", required=False, layers=MOE
    ),
    *(
        _layer(
            f"mlp.shared_experts.{p}_proj.weight",
            f"ffn_{p}_shexp.weight",
            required=False,  # moe_num_shared_experts may be 0
            layers=MOE,
        )
        for p in ("gate", "up", "down")
    ),
)

EXPERTS = tuple(
    ExpertRule(
        f"model.layers.{{bid}}.mlp.experts.{{xid}}.{p}_proj.weight",
        f"blk.{{bid}}.ffn_{p}_exps.weight",
    )
    for p in ("gate", "up", "down")  # the order the converter writes them in
)

ARCH = Architecture(
    gguf_arch="ernie4_5-moe",
    hf_names=("Ernie4_5_MoeForCausalLM",),
    tensors=(*OUTER, *ATTENTION, *BIASES, *FEED_FORWARD),
    experts=EXPERTS,
    expert_count_keys=("moe_num_experts",),
    skipped_prefixes=MTP_PREFIXES,
    config_hook=with_ernie_defaults,
    hparams_hook=ernie_hparams,
    moe_layers=ernie_moe_layers,
)
