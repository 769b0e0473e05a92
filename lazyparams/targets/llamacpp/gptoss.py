"""gpt-oss: GptOssForCausalLM (gpt-oss-20b, gpt-oss-120b), from a checkpoint whose experts are
floats (bf16, as transformers saves a dequantized model).

Attention with biases and per-head sinks, no rotary permutation; every layer a mixture of
experts behind a router with a bias. The checkpoint stores each layer's experts fused:
`experts.gate_up_proj` (experts, hidden, 2 x width) with gate and up interleaved column by
column, and `experts.down_proj` (experts, width, hidden), with their biases; llama.cpp wants
(experts, out, in), gate and up apart. Imports the tables and the llama table and the errors;
the hooks use only the methods of the tensors they are given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.tables import Architecture, HookContext, TensorRule


def _checked(tensor: Any, context: HookContext, ndim: int, what: str) -> Any:
    """`tensor` checked to hold num_local_experts experts, `ndim` axes and an even last axis
    where gate and up interleave."""
    experts = context.config.get("num_local_experts")
    bad = tensor.ndim != ndim or tensor.shape[0] != experts
    if bad or ("gate_up" in context.name and tensor.shape[-1] % 2):
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but "
            f"{context.config_path} says num_local_experts={experts}: expected {what}"
        )
    return tensor


def _gate_up(tensor: Any, context: HookContext) -> Any:
    """gate_up_proj as (experts, 2 x width, hidden): even rows gate, odd rows up."""
    shape = "(experts, hidden, 2 x width) with gate and up interleaved"
    return _checked(tensor, context, 3, shape).transpose(0, 2, 1)


def experts_gate(tensor: Any, context: HookContext) -> Any:
    """ffn_gate_exps: the even outputs of gate_up_proj."""
    return _gate_up(tensor, context)[:, ::2, :]


def experts_up(tensor: Any, context: HookContext) -> Any:
    """ffn_up_exps: the odd outputs of gate_up_proj."""
    return _gate_up(tensor, context)[:, 1::2, :]


def experts_down(tensor: Any, context: HookContext) -> Any:
    """ffn_down_exps: down_proj as (experts, hidden, width)."""
    return _checked(tensor, context, 3, "(experts, width, hidden)").transpose(0, 2, 1)


def down_bias(tensor: Any, context: HookContext) -> Any:
    """ffn_down_exps.bias: down_proj_bias as it is (the converter renames it `down_proj.bias`
    before looking it up, which is why this rule names its output itself)."""
    return _checked(tensor, context, 2, "(experts, hidden)")


def gate_bias(tensor: Any, context: HookContext) -> Any:
    """ffn_gate_exps.bias: the even entries of gate_up_proj_bias."""
    return _checked(tensor, context, 2, "(experts, 2 x width)")[:, ::2]


def up_bias(tensor: Any, context: HookContext) -> Any:
    """ffn_up_exps.bias: the odd entries of gate_up_proj_bias."""
    return _checked(tensor, context, 2, "(experts, 2 x width)")[:, 1::2]


def attention_sinks(tensor: Any, context: HookContext) -> Any:
    """attn_sinks.weight: one sink logit per head, as it is (the converter names `sinks` a
    weight before looking it up, which is why this rule names its output itself)."""
    heads = context.config.get("num_attention_heads")
    if tensor.ndim != 1 or tensor.shape[0] != heads:
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but "
            f"{context.config_path} says num_attention_heads={heads}: expected one sink a head"
        )
    return tensor


def gptoss_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The sliding window and the experts' width (the model's intermediate size)."""
    for key, gguf_key in (
        ("sliding_window", "attention.sliding_window"),
        ("intermediate_size", "expert_feed_forward_length"),
    ):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConvertError(f"{config_path}: expected a positive integer {key!r}, got {value!r}")
        yield gguf_key, "UINT32", value


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ATTENTION = (
    _layer("input_layernorm.weight", "attn_norm.weight"),
    *(
        _layer(f"self_attn.{p}_proj.{kind}", f"attn_{g}.{kind}")
        for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
        for kind in ("weight", "bias")
    ),
    _layer("self_attn.sinks", "attn_sinks.weight", hook=attention_sinks),
    _layer("post_attention_layernorm.weight", "post_attention_norm.weight"),
)

_EXPERTS = "mlp.experts"

FEED_FORWARD = (
    _layer("mlp.router.weight", "ffn_gate_inp.weight", keep_f32=True),
    _layer("mlp.router.bias", "ffn_gate_inp.bias"),
    _layer(f"{_EXPERTS}.down_proj", "ffn_down_exps.weight", hook=experts_down),
    _layer(f"{_EXPERTS}.down_proj_bias", "ffn_down_exps.bias", hook=down_bias),
    _layer(f"{_EXPERTS}.gate_up_proj", "ffn_gate_exps.weight", hook=experts_gate),
    _layer(f"{_EXPERTS}.gate_up_proj", "ffn_up_exps.weight", hook=experts_up),
    _layer(f"{_EXPERTS}.gate_up_proj_bias", "ffn_gate_exps.bias", hook=gate_bias),
    _layer(f"{_EXPERTS}.gate_up_proj_bias", "ffn_up_exps.bias", hook=up_bias),
)

ARCH = Architecture(
    gguf_arch="gpt-oss",
    hf_names=("GptOssForCausalLM",),
    tensors=(*OUTER, *ATTENTION, *FEED_FORWARD),
    expert_count_keys=("num_local_experts",),
    hparams_hook=gptoss_hparams,
)
