"""qwen2: Qwen2ForCausalLM. Like llama without the rotary permutation, with q/k/v biases kept
(in F32, as every 1-D tensor); small models tie their embeddings. Imports tables and the llama
table.
"""

from lazyparams.targets.llamacpp.llama import DENSE_MLP, LAYER_RULES, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, TensorRule, layer_tensors

UNPERMUTED = tuple((hf, gguf, "") for hf, gguf, _ in LAYER_RULES)
BIASES = tuple(
    TensorRule(f"model.layers.{{bid}}.self_attn.{p}_proj.bias", f"blk.{{bid}}.attn_{p}.bias")
    for p in ("q", "k", "v")
)

ARCH = Architecture(
    gguf_arch="qwen2",
    hf_names=("Qwen2ForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", UNPERMUTED + DENSE_MLP), *BIASES),
)
