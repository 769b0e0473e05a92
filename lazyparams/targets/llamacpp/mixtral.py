"""Mixtral: llama's layers with a mixture of experts, written by llama.cpp as architecture llama.

The eight (or `num_local_experts`) experts of a layer, each `w1`/`w2`/`w3` in its own tensor and
often in different shards, are stacked into one 3-D tensor per layer and kind; the router
(`gate`) stays F32 as llama.cpp keeps it. Imports tables and the llama table.
"""

from lazyparams.targets.llamacpp.llama import LAYER_RULES, OPTIONAL_BIASES, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, ExpertRule, TensorRule, layer_tensors

_EXPERTS = "model.layers.{bid}.block_sparse_moe.experts.{xid}"

ARCH = Architecture(
    gguf_arch="llama",
    hf_names=("MixtralForCausalLM",),
    tensors=(
        *OUTER,
        *layer_tensors("model.layers", LAYER_RULES),
        TensorRule(
            "model.layers.{bid}.block_sparse_moe.gate.weight",
            "blk.{bid}.ffn_gate_inp.weight",
            keep_f32=True,
        ),
        *OPTIONAL_BIASES,
    ),
    experts=(
        ExpertRule(f"{_EXPERTS}.w1.weight", "blk.{bid}.ffn_gate_exps.weight"),
        ExpertRule(f"{_EXPERTS}.w2.weight", "blk.{bid}.ffn_down_exps.weight"),
        ExpertRule(f"{_EXPERTS}.w3.weight", "blk.{bid}.ffn_up_exps.weight"),
    ),
    expert_count_keys=("num_local_experts",),
    extra_hparams=("vocab_size", "rope.dimension_count"),
)
