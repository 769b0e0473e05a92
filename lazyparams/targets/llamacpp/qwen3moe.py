"""qwen3moe: Qwen3MoeForCausalLM. Qwen3's attention (per-head q/k norms, no biases) with Qwen2-MoE's
routed experts and F32 router, without a shared expert. Imports tables and the qwen2moe, qwen3,
qwen2 and llama tables.
"""

from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.qwen2 import UNPERMUTED
from lazyparams.targets.llamacpp.qwen2moe import (
    EXPERT_COUNT_KEYS,
    EXPERT_WIDTH,
    EXPERTS,
    ROUTER,
)
from lazyparams.targets.llamacpp.qwen3 import HEAD_NORMS
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

ARCH = Architecture(
    gguf_arch="qwen3moe",
    hf_names=("Qwen3MoeForCausalLM",),
    tensors=(
        *OUTER,
        *layer_tensors("model.layers", UNPERMUTED + HEAD_NORMS),
        ROUTER,
    ),
    experts=EXPERTS,
    expert_count_keys=EXPERT_COUNT_KEYS,
    own_hparams=(EXPERT_WIDTH,),
)
