"""deepseek2: DeepseekV2ForCausalLM and DeepseekV3ForCausalLM (multi-head latent attention, MoE).

Attention compresses keys and values into a latent of `kv_lora_rank`; llama.cpp wants the
latent's up-projection `kv_b_proj` split per head into `attn_k_b` (transposed) and `attn_v_b`,
and writes the model as MQA (one key-value head of width `kv_lora_rank + qk_rope_head_dim`).
The first `first_k_dense_replace` layers are dense; the others hold routed experts (stacked),
shared experts, an F32 router and, in V3, the router's score-correction bias. Layers past
`num_hidden_layers` (multi-token prediction) are left out. Imports the tables, the llama table
and the errors; the hooks use only the methods of the tensors they are given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import rope_parameters
from lazyparams.targets.llamacpp.llama import DENSE_MLP, OUTER
from lazyparams.targets.llamacpp.tables import (
    DENSE,
    MOE,
    Architecture,
    ExpertRule,
    HookContext,
    TensorRule,
)

_DEFAULT_KV_LORA_RANK = 512
_DEFAULT_RMS_NORM_EPS = 1e-6


def _config_int(config: Mapping[str, Any], key: str, config_path: Path, default: Any = None) -> int:
    """config[key] (or `default` when absent) checked to be a non-negative integer."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConvertError(
            f"{config_path}: expected a non-negative integer {key!r} (MLA attention), got {value!r}"
        )
    return value


def _kv_b_heads(tensor: Any, context: HookContext) -> tuple[Any, int]:
    """kv_b_proj as (key-value heads, qk_nope_head_dim + v_head_dim, kv_lora_rank), checked,
    and qk_nope_head_dim: each head's key rows come first."""
    config, path = context.config, context.config_path
    heads = _config_int(config, "num_key_value_heads", path)
    nope = _config_int(config, "qk_nope_head_dim", path)
    value = _config_int(config, "v_head_dim", path)
    rows = tensor.shape[0]
    if tensor.ndim != 2 or rows != heads * (nope + value):
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but {path} says "
            f"num_key_value_heads={heads} x (qk_nope_head_dim={nope} + v_head_dim={value}) "
            f"= {heads * (nope + value)} rows"
        )
    return tensor.reshape(heads, nope + value, tensor.shape[1]), nope


def mla_k_b(tensor: Any, context: HookContext) -> Any:
    """attn_k_b: each head's key rows of kv_b_proj, transposed to (rank, qk_nope_head_dim)."""
    heads, nope = _kv_b_heads(tensor, context)
    return heads[:, :nope, :].transpose(0, 2, 1)


def mla_v_b(tensor: Any, context: HookContext) -> Any:
    """attn_v_b: each head's value rows of kv_b_proj, (v_head_dim, rank) per head."""
    heads, nope = _kv_b_heads(tensor, context)
    return heads[:, nope:, :]


def mla_as_mqa(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as llama.cpp's converter writes it: MLA as MQA (one key-value head), RMS eps
    1e-6 when the config has none, and `head_dim` = `qk_rope_head_dim`, which transformers'
    DeepseekV2/V3 config adds and the converter reads (it loads config.json through it)."""
    return {
        **config,
        "num_key_value_heads": 1,
        "rms_norm_eps": config.get("rms_norm_eps", _DEFAULT_RMS_NORM_EPS),
        "head_dim": config.get("qk_rope_head_dim"),
    }


def deepseek2_hparams(
    config: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, str, Any]]:
    """deepseek2's own keys, in the converter's order: dense lead, latent ranks, the MLA key
    and value widths, the experts, the rotary width and yarn's log multiplier."""
    if config.get("first_k_dense_replace") is not None:
        dense = _config_int(config, "first_k_dense_replace", config_path)
    elif config.get("n_routed_experts") is None:
        dense = _config_int(config, "num_hidden_layers", config_path)
    else:
        dense = 0
    yield "leading_dense_block_count", "UINT32", dense
    yield "vocab_size", "UINT32", _config_int(config, "vocab_size", config_path)
    if config.get("q_lora_rank") is not None:
        yield "attention.q_lora_rank", "UINT32", _config_int(config, "q_lora_rank", config_path)
    yield from _mla_widths(config, config_path)
    yield from _expert_keys(config, config_path)
    rope = _config_int(config, "qk_rope_head_dim", config_path)
    yield "rope.dimension_count", "UINT32", rope
    mscale = rope_parameters(config).get("mscale_all_dim")
    if mscale is not None:
        # llama.cpp keeps DeepSeek's historical 0.1 * mscale_all_dim here
        yield "rope.scaling.yarn_log_multiplier", "FLOAT32", 0.1 * float(mscale)


def _mla_widths(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The latent rank and the key/value widths of the MQA form and of the MLA heads."""
    rank = _config_int(config, "kv_lora_rank", config_path, _DEFAULT_KV_LORA_RANK)
    rope = _config_int(config, "qk_rope_head_dim", config_path)
    yield "attention.kv_lora_rank", "UINT32", rank
    yield "attention.key_length", "UINT32", rank + rope
    yield "attention.value_length", "UINT32", rank
    nope = _config_int(config, "qk_nope_head_dim", config_path)
    yield "attention.key_length_mla", "UINT32", nope + rope
    yield "attention.value_length_mla", "UINT32", _config_int(config, "v_head_dim", config_path)


def _expert_keys(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """Expert width and counts, the routed weights' scale and whether they are normalized."""
    key = "moe_intermediate_size" if "moe_intermediate_size" in config else "intermediate_size"
    yield "expert_feed_forward_length", "UINT32", _config_int(config, key, config_path)
    if config.get("n_routed_experts") is not None:
        yield "expert_count", "UINT32", _config_int(config, "n_routed_experts", config_path)
    yield "expert_shared_count", "UINT32", _config_int(config, "n_shared_experts", config_path, 0)
    scale = config.get("routed_scaling_factor")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise ConvertError(
                f"{config_path}: expected a number 'routed_scaling_factor', got {scale!r}"
            )
        yield "expert_weights_scale", "FLOAT32", scale
    if config.get("norm_topk_prob"):
        yield "expert_weights_norm", "BOOL", True


def moe_after_dense_lead(
    config: Mapping[str, Any], layers: int, config_path: Path
) -> frozenset[int]:
    """The layers from `first_k_dense_replace` on hold experts."""
    first = config.get("first_k_dense_replace")
    first = 0 if first is None else _config_int(config, "first_k_dense_replace", config_path)
    return frozenset(range(first, layers))


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ATTENTION = (
    _layer("input_layernorm.weight", "attn_norm.weight"),
    # q is one projection (V2-Lite, q_lora_rank null) or a low-rank pair with a norm between
    _layer("self_attn.q_proj.weight", "attn_q.weight", required=False),
    _layer("self_attn.q_a_proj.weight", "attn_q_a.weight", required=False),
    _layer("self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight", required=False),
    _layer("self_attn.q_b_proj.weight", "attn_q_b.weight", required=False),
    _layer("self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"),
    _layer("self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"),
    _layer("self_attn.kv_b_proj.weight", "attn_k_b.weight", hook=mla_k_b),
    _layer("self_attn.kv_b_proj.weight", "attn_v_b.weight", hook=mla_v_b),
    _layer("self_attn.o_proj.weight", "attn_output.weight"),
    _layer("post_attention_layernorm.weight", "ffn_norm.weight"),
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

_EXPERTS = "model.layers.{bid}.mlp.experts.{xid}"

ROUTED_EXPERTS = tuple(
    ExpertRule(f"{_EXPERTS}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight")
    for p in ("down", "gate", "up")  # the order the converter writes them in
)

ARCH = Architecture(
    gguf_arch="deepseek2",
    hf_names=("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
    tensors=(*OUTER, *ATTENTION, *FEED_FORWARD),
    experts=ROUTED_EXPERTS,
    expert_count_keys=("n_routed_experts",),
    config_hook=mla_as_mqa,
    hparams_hook=deepseek2_hparams,
    moe_layers=moe_after_dense_lead,
    extra_layers_skipped=True,
)
