"""qwen3: Qwen3ForCausalLM. Qwen2's layout without the q/k/v biases, with an RMS norm over each
head of q and k (`q_norm`, `k_norm`) and an explicit `head_dim`. Imports tables and the qwen2 and
llama tables.
"""

from lazyparams.targets.llamacpp.llama import DENSE_MLP, OUTER
from lazyparams.targets.llamacpp.qwen2 import UNPERMUTED
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

HEAD_NORMS = (
    ("self_attn.q_norm.weight", "attn_q_norm.weight", ""),
    ("self_attn.k_norm.weight", "attn_k_norm.weight", ""),
)

ARCH = Architecture(
    gguf_arch="qwen3",
    hf_names=("Qwen3ForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", UNPERMUTED + HEAD_NORMS + DENSE_MLP)),
)
