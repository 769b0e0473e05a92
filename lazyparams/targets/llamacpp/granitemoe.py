"""granitemoe: GraniteMoeForCausalLM and GraniteMoeSharedForCausalLM (IBM Granite 3.x MoE).

Granite's attention, norms and scales with a mixture of experts stored already stacked: each
layer's `input_linear` holds every expert's gate and up rows ([experts, 2 x
intermediate_size, hidden]), which the converter splits into `ffn_gate_exps` and `ffn_up_exps`;
`output_linear` is `ffn_down_exps` as it is; the router stays F32. The shared variant adds a
shared expert whose fused `input_linear` is split the same way by `shared_intermediate_size`.
Imports the tables, the granite and llama tables and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.granite import granite_config, granite_scales
from lazyparams.targets.llamacpp.llama import LAYER_RULES, OPTIONAL_BIASES, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, HookContext, TensorRule, layer_tensors

EXPERT_COUNT_KEYS = ("num_local_experts",)


def _config_int(config: Mapping[str, Any], key: str, path: Path) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{path}: expected a positive integer {key!r}, got {value!r}")
    return value


def _halves(tensor: Any, context: HookContext, width_key: str, stacked: bool) -> int:
    """Check a fused gate/up tensor: ([experts,] 2 x config[width_key], hidden); its width."""
    config, path = context.config, context.config_path
    width = _config_int(config, width_key, path)
    expected: tuple[Any, ...] = (2 * width, tensor.shape[-1])
    why = f"2 x {width_key}={width} rows"
    if stacked:
        experts = _config_int(config, EXPERT_COUNT_KEYS[0], path)
        expected = (experts, *expected)
        why = f"{EXPERT_COUNT_KEYS[0]}={experts} experts of {why}"
    if tuple(tensor.shape) != expected:
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but {path} says {why}"
        )
    return width


def experts_gate(tensor: Any, context: HookContext) -> Any:
    """ffn_gate_exps: the first intermediate_size rows of each expert of input_linear."""
    width = _halves(tensor, context, "intermediate_size", stacked=True)
    return tensor[:, :width, :]


def experts_up(tensor: Any, context: HookContext) -> Any:
    """ffn_up_exps: the last intermediate_size rows of each expert of input_linear."""
    width = _halves(tensor, context, "intermediate_size", stacked=True)
    return tensor[:, width:, :]


def experts_down(tensor: Any, context: HookContext) -> Any:
    """ffn_down_exps: output_linear as it is, checked to be (experts, hidden, intermediate)."""
    config, path = context.config, context.config_path
    experts = _config_int(config, EXPERT_COUNT_KEYS[0], path)
    width = _config_int(config, "intermediate_size", path)
    if tensor.ndim != 3 or (tensor.shape[0], tensor.shape[2]) != (experts, width):
        raise ConvertError(
            f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but {path} says "
            f"{EXPERT_COUNT_KEYS[0]}={experts} experts of intermediate_size={width} columns"
        )
    return tensor


def shared_gate(tensor: Any, context: HookContext) -> Any:
    """ffn_gate_shexp: the first shared_intermediate_size rows of the shared input_linear."""
    width = _halves(tensor, context, "shared_intermediate_size", stacked=False)
    return tensor[:width, :]


def shared_up(tensor: Any, context: HookContext) -> Any:
    """ffn_up_shexp: the last shared_intermediate_size rows of the shared input_linear."""
    width = _halves(tensor, context, "shared_intermediate_size", stacked=False)
    return tensor[width:, :]


def granitemoe_hparams(
    config: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, str, Any]]:
    """Granite's scales, then the shared expert's width where the model has one."""
    yield from granite_scales(config, config_path)
    if config.get("shared_intermediate_size"):
        width = _config_int(config, "shared_intermediate_size", config_path)
        yield "expert_shared_feed_forward_length", "UINT32", width


def _moe(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


_SPARSE = "block_sparse_moe"
FEED_FORWARD = (
    _moe(f"{_SPARSE}.router.layer.weight", "ffn_gate_inp.weight", keep_f32=True),
    _moe(f"{_SPARSE}.input_linear.weight", "ffn_gate_exps.weight", hook=experts_gate),
    _moe(f"{_SPARSE}.input_linear.weight", "ffn_up_exps.weight", hook=experts_up),
    _moe(f"{_SPARSE}.output_linear.weight", "ffn_down_exps.weight", hook=experts_down),
    # the shared expert of GraniteMoeShared
    _moe(
        "shared_mlp.input_linear.weight", "ffn_gate_shexp.weight", required=False, hook=shared_gate
    ),
    _moe("shared_mlp.input_linear.weight", "ffn_up_shexp.weight", required=False, hook=shared_up),
    _moe("shared_mlp.output_linear.weight", "ffn_down_shexp.weight", required=False),
)

ARCH = Architecture(
    gguf_arch="granitemoe",
    hf_names=("GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM"),
    tensors=(*OUTER, *layer_tensors("model.layers", LAYER_RULES), *FEED_FORWARD, *OPTIONAL_BIASES),
    expert_count_keys=EXPERT_COUNT_KEYS,
    extra_hparams=("vocab_size", "rope.dimension_count"),
    config_hook=granite_config,
    hparams_hook=granitemoe_hparams,
)
