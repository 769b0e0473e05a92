"""llama4: Llama4ForCausalLM (Llama 4 Scout and Maverick, the text model).

Llama's attention without the rotary permutation; dense layers and, every
`interleave_moe_layer_step`-th layer (or those `moe_layers` lists), a mixture of experts with
one shared expert and an F32 router. The checkpoint stores each layer's experts fused:
`experts.gate_up_proj` (experts, hidden, 2 x width) and `experts.down_proj` (experts, width,
hidden); llama.cpp wants them (experts, out, in), gate and up apart. `intermediate_size` is the
experts' width and `intermediate_size_mlp` the dense one, which the converter swaps. llama 3
rope frequency factors are written as llama's converter writes them. Imports the tables, the
llama table and the errors; the hooks use only the methods of the tensors they are given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import LAYER_RULES, OUTER, with_head_dim
from lazyparams.targets.llamacpp.tables import (
    DENSE,
    MOE,
    Architecture,
    HookContext,
    TensorRule,
    layer_tensors,
)


def _positive(config: Mapping[str, Any], key: str, config_path: Path) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{config_path}: expected a positive integer {key!r}, got {value!r}")
    return value


def swapped_widths(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as the converter rewrites it: the dense width as `intermediate_size`, the
    experts' as `intermediate_size_moe`, and `head_dim` as transformers gives it."""
    out = with_head_dim(config)
    if "intermediate_size_mlp" in config:
        out["intermediate_size_moe"] = config.get("intermediate_size")
        out["intermediate_size"] = config["intermediate_size_mlp"]
    return out


def llama4_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The expert layer step and width, and no sliding window where every layer is full."""
    yield "interleave_moe_layer_step", "UINT32", _moe_step(config, config_path)
    yield (
        "expert_feed_forward_length",
        "UINT32",
        _positive(config, "intermediate_size_moe", config_path),
    )
    kinds = config.get("layer_types")
    if isinstance(kinds, list) and all(kind == "full_attention" for kind in kinds):
        yield "attention.sliding_window", "UINT32", 0


def _moe_step(config: Mapping[str, Any], config_path: Path) -> int:
    return _positive({"step": config.get("interleave_moe_layer_step", 1)}, "step", config_path)


def llama4_moe_layers(config: Mapping[str, Any], layers: int, config_path: Path) -> frozenset[int]:
    """The layers config.json's `moe_layers` lists, else every `interleave_moe_layer_step`-th."""
    listed = config.get("moe_layers")
    if listed is None:
        step = _moe_step(config, config_path)
        return frozenset(range(step - 1, layers, step))
    if not isinstance(listed, list) or not all(type(i) is int and 0 <= i < layers for i in listed):
        raise ConvertError(
            f"{config_path}: expected 'moe_layers' to list layers below {layers}, got {listed!r}"
        )
    return frozenset(listed)


def _fused(tensor: Any, context: HookContext, parts: int) -> Any:
    """A fused expert tensor (experts, in, parts x width) as (experts, parts x width, in),
    checked against the config's expert count."""
    experts = context.config.get("num_local_experts")
    if tensor.ndim != 3 or tensor.shape[0] != experts or tensor.shape[2] % parts:
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but {context.config_path} "
            f"says num_local_experts={experts}: expected (experts, input, {parts} x width)"
        )
    return tensor.transpose(0, 2, 1)


def experts_gate(tensor: Any, context: HookContext) -> Any:
    """ffn_gate_exps: the first half of gate_up_proj's outputs."""
    fused = _fused(tensor, context, 2)
    return fused[:, : fused.shape[1] // 2, :]


def experts_up(tensor: Any, context: HookContext) -> Any:
    """ffn_up_exps: the second half of gate_up_proj's outputs."""
    fused = _fused(tensor, context, 2)
    return fused[:, fused.shape[1] // 2 :, :]


def experts_down(tensor: Any, context: HookContext) -> Any:
    """ffn_down_exps: down_proj as (experts, hidden, width)."""
    return _fused(tensor, context, 1)


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ATTENTION = layer_tensors("model.layers", tuple((hf, gguf, "") for hf, gguf, _ in LAYER_RULES))

FEED_FORWARD = (
    *(
        _layer(f"feed_forward.{p}_proj.weight", f"ffn_{p}.weight", layers=DENSE)
        for p in ("gate", "up", "down")
    ),
    _layer("feed_forward.router.weight", "ffn_gate_inp.weight", keep_f32=True, layers=MOE),
    *(
        _layer(f"feed_forward.shared_expert.{p}_proj.weight", f"ffn_{p}_shexp.weight", layers=MOE)
        for p in ("gate", "up", "down")
    ),
    _layer(
        "feed_forward.experts.gate_up_proj", "ffn_gate_exps.weight", layers=MOE, hook=experts_gate
    ),
    _layer("feed_forward.experts.gate_up_proj", "ffn_up_exps.weight", layers=MOE, hook=experts_up),
    _layer("feed_forward.experts.down_proj", "ffn_down_exps.weight", layers=MOE, hook=experts_down),
)

ARCH = Architecture(
    gguf_arch="llama4",
    hf_names=("Llama4ForCausalLM",),
    tensors=(*OUTER, *ATTENTION, *FEED_FORWARD),
    expert_count_keys=("num_local_experts",),
    extra_hparams=("vocab_size", "rope.dimension_count"),
    config_hook=swapped_widths,
    hparams_hook=llama4_hparams,
    moe_layers=llama4_moe_layers,
    llama3_rope_freqs=True,
)
