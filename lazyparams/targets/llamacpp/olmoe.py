"""olmoe: OlmoeForCausalLM (OLMoE). Llama's attention without the rotary permutation, with
q/k norms over the whole projection; every layer a mixture of experts (stacked down, gate, up)
behind an F32 router. The converter writes the RMS epsilon as 1e-5 whatever config.json says.
Imports the tables and the llama and qwen2moe tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lazyparams.targets.llamacpp.llama import LAYER_RULES, OUTER
from lazyparams.targets.llamacpp.qwen2moe import EXPERT_COUNT_KEYS, EXPERTS, ROUTER
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

RMS_EPS = 1e-5

ATTENTION = (
    *((hf, gguf, "") for hf, gguf, _ in LAYER_RULES),
    ("self_attn.q_norm.weight", "attn_q_norm.weight", ""),
    ("self_attn.k_norm.weight", "attn_k_norm.weight", ""),
)


def fixed_rms_eps(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json with the RMS epsilon the converter writes for OLMoE (1e-5, in its place)."""
    return {**config, "rms_norm_eps": RMS_EPS}


ARCH = Architecture(
    gguf_arch="olmoe",
    hf_names=("OlmoeForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", ATTENTION), ROUTER),
    experts=EXPERTS,
    expert_count_keys=EXPERT_COUNT_KEYS,
    config_hook=fixed_rms_eps,
)
