"""qwen2moe: Qwen2MoeForCausalLM. Qwen2's attention (q/k/v biases, no rotary permutation) with a
mixture of experts: routed experts stacked per layer, one shared expert with its own sigmoid
gate, both routers kept F32 as llama.cpp keeps them. Every layer holds experts: llama.cpp's
qwen2moe has no dense feed-forward (a model with `mlp_only_layers` is refused by its tensors).
Imports tables and the qwen2 and llama tables.
"""

from __future__ import annotations

from typing import Any

from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.qwen2 import BIASES, UNPERMUTED
from lazyparams.targets.llamacpp.tables import (
    Architecture,
    ExpertRule,
    HParam,
    TensorRule,
    layer_tensors,
)


def _layer(hf: str, gguf: str, **options: Any) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


ROUTER = _layer("mlp.gate.weight", "ffn_gate_inp.weight", keep_f32=True)
EXPERTS = tuple(
    ExpertRule(
        f"model.layers.{{bid}}.mlp.experts.{{xid}}.{p}_proj.weight",
        f"blk.{{bid}}.ffn_{p}_exps.weight",
    )
    for p in ("down", "gate", "up")  # the order the converter writes them in
)
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts")
EXPERT_WIDTH = HParam("expert_feed_forward_length", ("moe_intermediate_size",))

SHARED_EXPERT = (
    *(
        _layer(f"mlp.shared_expert.{p}_proj.weight", f"ffn_{p}_shexp.weight")
        for p in ("gate", "up", "down")
    ),
    _layer("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", keep_f32=True),
)

ARCH = Architecture(
    gguf_arch="qwen2moe",
    hf_names=("Qwen2MoeForCausalLM",),
    tensors=(
        *OUTER,
        *layer_tensors("model.layers", UNPERMUTED),
        *BIASES,
        ROUTER,
        *SHARED_EXPERT,
    ),
    experts=EXPERTS,
    expert_count_keys=EXPERT_COUNT_KEYS,
    own_hparams=(
        EXPERT_WIDTH,
        HParam("expert_shared_feed_forward_length", ("shared_expert_intermediate_size",)),
    ),
)
