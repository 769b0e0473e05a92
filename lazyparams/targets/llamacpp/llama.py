"""llama: LlamaForCausalLM and MistralForCausalLM, which llama.cpp writes as one architecture.

Hugging Face stores q and k with the two rotary halves of each head apart; llama.cpp wants them
interleaved, so both are permuted back (k with the key-value head count). Tied embeddings (no
lm_head) write no `output.weight`: llama.cpp then reads `token_embd.weight`. Imports tables only.
"""

from collections.abc import Mapping
from typing import Any

from lazyparams.targets.llamacpp.tables import Architecture, TensorRule, layer_tensors

LAYER_RULES = (
    ("input_layernorm.weight", "attn_norm.weight", ""),
    ("self_attn.q_proj.weight", "attn_q.weight", "q"),
    ("self_attn.k_proj.weight", "attn_k.weight", "k"),
    ("self_attn.v_proj.weight", "attn_v.weight", ""),
    ("self_attn.o_proj.weight", "attn_output.weight", ""),
    ("post_attention_layernorm.weight", "ffn_norm.weight", ""),
)
"""(Hugging Face, GGUF, rope) of the attention half of a decoder layer, shared with Mixtral."""

DENSE_MLP = (
    ("mlp.gate_proj.weight", "ffn_gate.weight", ""),
    ("mlp.up_proj.weight", "ffn_up.weight", ""),
    ("mlp.down_proj.weight", "ffn_down.weight", ""),
)

OUTER = (
    TensorRule("model.embed_tokens.weight", "token_embd.weight"),
    TensorRule("model.norm.weight", "output_norm.weight"),
    TensorRule("lm_head.weight", "output.weight", required=False),
)
"""Tensors outside the layers; lm_head is absent when the embeddings are tied."""

OPTIONAL_BIASES = tuple(
    TensorRule(
        f"model.layers.{{bid}}.self_attn.{p}_proj.bias",
        f"blk.{{bid}}.attn_{g}.bias",
        r,
        required=False,
    )
    for p, g, r in (("q", "q", "q"), ("k", "k", "k"), ("v", "v", ""), ("o", "output", ""))
)


def with_head_dim(config: Mapping[str, Any]) -> dict[str, Any]:
    """config.json as transformers' LlamaConfig and MistralConfig load it, which is how the
    converter reads it: `head_dim` is hidden_size / num_attention_heads where the file has
    none (the converter then writes the attention key and value lengths)."""
    if config.get("head_dim") is not None:
        return dict(config)
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        return dict(config)  # the hyperparameter checks name what is wrong
    return {**config, "head_dim": hidden // heads}


ARCH = Architecture(
    gguf_arch="llama",
    hf_names=("LlamaForCausalLM", "MistralForCausalLM", "LLaMAForCausalLM"),
    tensors=(*OUTER, *layer_tensors("model.layers", LAYER_RULES + DENSE_MLP), *OPTIONAL_BIASES),
    extra_hparams=("vocab_size", "rope.dimension_count"),
    config_hook=with_head_dim,
)
