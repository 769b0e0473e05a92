"""starcoder2: Starcoder2ForCausalLM. LayerNorms with biases, attention and a plain (ungated)
MLP `c_fc` -> `c_proj` with biases where `use_bias` is set, no rotary permutation, the output
usually tied to the embeddings. The converter's StarCoder2 class adds nothing to the shared
metadata (its `sliding_window` is not written). Imports the tables and the llama table.
"""

from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.tables import LAYER, Architecture, TensorRule


def _layer(hf: str, gguf: str, required: bool = True) -> TensorRule:
    return TensorRule(f"model.layers.{LAYER}.{hf}", f"blk.{LAYER}.{gguf}", required=required)


NORMS = (
    *(_layer(f"input_layernorm.{p}", f"attn_norm.{p}") for p in ("weight", "bias")),
    *(_layer(f"post_attention_layernorm.{p}", f"ffn_norm.{p}") for p in ("weight", "bias")),
    TensorRule("model.norm.bias", "output_norm.bias"),
)
"""The LayerNorms' weights and biases (the final norm's weight is in llama's OUTER)."""

_PROJECTIONS = (
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("mlp.c_fc", "ffn_up"),
    ("mlp.c_proj", "ffn_down"),
)

PROJECTIONS = tuple(
    rule
    for hf, gguf in _PROJECTIONS
    for rule in (
        _layer(f"{hf}.weight", f"{gguf}.weight"),
        _layer(f"{hf}.bias", f"{gguf}.bias", required=False),  # present with use_bias
    )
)

ARCH = Architecture(
    gguf_arch="starcoder2",
    hf_names=("Starcoder2ForCausalLM",),
    tensors=(*OUTER, *NORMS, *PROJECTIONS),
)
