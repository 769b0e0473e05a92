"""exaone: ExaoneForCausalLM (EXAONE 3.0 and 3.5).

Llama's layer under GPT-2 style names (`transformer.h.*`: `ln_1`, `attn.attention.*_proj`,
`out_proj`, `ln_2`, `mlp.c_fc_0` the gate, `mlp.c_fc_1` the up, `mlp.c_proj` the down), as
gguf-py's map knows them; no rotary permutation (llama.cpp runs EXAONE with NeoX rotary on
Hugging Face's layout). The shared metadata from config.json's own keys (`num_layers`,
`layer_norm_epsilon`, `activation_function`), as the converter reads a config no transformers
class renames, then the rotary width; llama 3's rope factors for a llama3 rope. Only the SiLU
activation the converter accepts is written. Imports the tables, the hyperparameter helpers and
the errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import first_present, head_dim, rope_parameters
from lazyparams.targets.llamacpp.tables import Architecture, TensorRule, layer_tensors

_ROTARY_SHARE_KEYS = ("partial_rotary_factor", "rope_pct", "rope_percent")
"""The top-level keys the converter mirrors into the rope settings as the partial factor."""


def exaone_hparams(config: Mapping[str, Any], config_path: Path) -> Iterator[tuple[str, str, Any]]:
    """The rotary width after the file type: hidden / heads times the partial rotary factor
    (1 when none); an activation other than SiLU is refused."""
    activation = first_present(config, ("activation_function", "hidden_act"))
    activation = "silu" if activation is None else activation
    if activation != "silu":
        raise ConvertError(
            f"{config_path}: expected 'activation_function' 'silu' (the only one llama.cpp's "
            f"exaone runs), got {activation!r}"
        )
    share = rope_parameters(config).get("partial_rotary_factor")
    if share is None:
        share = first_present(config, _ROTARY_SHARE_KEYS)
    share = 1.0 if share is None else share
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise ConvertError(
            f"{config_path}: expected a number 'partial_rotary_factor', got {share!r}"
        )
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        raise ConvertError(f"{config_path}: expected integer hidden_size and num_attention_heads")
    head_dim(config, config_path)  # checked here: the rope factors are computed from it
    yield "rope.dimension_count", "UINT32", int(share * (hidden // heads))


LAYER = (
    ("ln_1.weight", "attn_norm.weight", ""),
    ("attn.attention.q_proj.weight", "attn_q.weight", ""),
    ("attn.attention.k_proj.weight", "attn_k.weight", ""),
    ("attn.attention.v_proj.weight", "attn_v.weight", ""),
    ("attn.attention.out_proj.weight", "attn_output.weight", ""),
    ("ln_2.weight", "ffn_norm.weight", ""),
    ("mlp.c_fc_0.weight", "ffn_gate.weight", ""),
    ("mlp.c_fc_1.weight", "ffn_up.weight", ""),
    ("mlp.c_proj.weight", "ffn_down.weight", ""),
)

OUTER = (
    TensorRule("transformer.wte.weight", "token_embd.weight"),
    TensorRule("transformer.ln_f.weight", "output_norm.weight"),
    TensorRule("lm_head.weight", "output.weight", required=False),  # absent when tied
)

ARCH = Architecture(
    gguf_arch="exaone",
    hf_names=("ExaoneForCausalLM",),
    tensors=(*OUTER, *layer_tensors("transformer.h", LAYER)),
    hparams_hook=exaone_hparams,
    llama3_rope_freqs=True,
)
