"""A header-only DeepSeek-V3-size checkpoint: real safetensors headers, sparse (unwritten) data.

The layout is the published one (61 layers plus the multi-token-prediction layer, 256 routed
experts and one shared expert per MoE layer, FP8 linear weights with float32 block scales), so
the plan of a 671B conversion can be made without 700 GB of disk or any read. Files are
preallocated with `truncate`, so they take no space. Imports `lazyparams.io` only.
"""

from __future__ import annotations

import os
from pathlib import Path

from lazyparams.io import TensorInfo, plan_shards
from lazyparams.io.safetensors_format import build_header
from lazyparams.io.safetensors_sink import index_json

HIDDEN, DENSE_FFN, EXPERT_FFN, EXPERTS, VOCAB = 7168, 18432, 2048, 256, 129280
LAYERS, DENSE_LAYERS, Q_RANK, KV_RANK, HEADS = 61, 3, 1536, 512, 128
BLOCK = 128
SHARD_BYTES = 4_300_000_000  # the published checkpoint has 163 shards of about 4.3 GB


def _linear(name: str, rows: int, cols: int) -> list[TensorInfo]:
    """An FP8 linear weight and its float32 scale per 128x128 block."""
    blocks = (-(-rows // BLOCK), -(-cols // BLOCK))
    return [
        TensorInfo.of(f"{name}.weight", (rows, cols), "float8_e4m3fn"),
        TensorInfo.of(f"{name}.weight_scale_inv", blocks, "float32"),
    ]


def _norm(name: str, size: int) -> TensorInfo:
    return TensorInfo.of(f"{name}.weight", (size,), "bfloat16")


def _attention(p: str) -> list[TensorInfo]:
    return [
        *_linear(f"{p}self_attn.q_a_proj", Q_RANK, HIDDEN),
        _norm(f"{p}self_attn.q_a_layernorm", Q_RANK),
        *_linear(f"{p}self_attn.q_b_proj", HEADS * 192, Q_RANK),
        *_linear(f"{p}self_attn.kv_a_proj_with_mqa", KV_RANK + 64, HIDDEN),
        _norm(f"{p}self_attn.kv_a_layernorm", KV_RANK),
        *_linear(f"{p}self_attn.kv_b_proj", HEADS * 256, KV_RANK),
        *_linear(f"{p}self_attn.o_proj", HIDDEN, HEADS * 128),
    ]


def _mlp(p: str, ffn: int) -> list[TensorInfo]:
    return [
        *_linear(f"{p}gate_proj", ffn, HIDDEN),
        *_linear(f"{p}up_proj", ffn, HIDDEN),
        *_linear(f"{p}down_proj", HIDDEN, ffn),
    ]


def _moe(p: str) -> list[TensorInfo]:
    infos = [
        TensorInfo.of(f"{p}mlp.gate.weight", (EXPERTS, HIDDEN), "bfloat16"),
        TensorInfo.of(f"{p}mlp.gate.e_score_correction_bias", (EXPERTS,), "float32"),
    ]
    for expert in range(EXPERTS):
        infos += _mlp(f"{p}mlp.experts.{expert}.", EXPERT_FFN)
    return infos + _mlp(f"{p}mlp.shared_experts.", EXPERT_FFN)


def layer_infos(layer: int) -> list[TensorInfo]:
    """The tensors of one decoder layer (the last one also carries the MTP head)."""
    p = f"model.layers.{layer}."
    infos = [_norm(f"{p}input_layernorm", HIDDEN), *_attention(p)]
    infos.append(_norm(f"{p}post_attention_layernorm", HIDDEN))
    infos += _mlp(f"{p}mlp.", DENSE_FFN) if layer < DENSE_LAYERS else _moe(p)
    if layer == LAYERS:
        infos += [
            TensorInfo.of(f"{p}embed_tokens.weight", (VOCAB, HIDDEN), "bfloat16"),
            _norm(f"{p}enorm", HIDDEN),
            _norm(f"{p}hnorm", HIDDEN),
            TensorInfo.of(f"{p}eh_proj.weight", (HIDDEN, 2 * HIDDEN), "bfloat16"),
            _norm(f"{p}shared_head.norm", HIDDEN),
            TensorInfo.of(f"{p}shared_head.head.weight", (VOCAB, HIDDEN), "bfloat16"),
        ]
    return infos


def deepseek_v3_infos(layers: int = LAYERS + 1) -> list[TensorInfo]:
    """Every tensor of the checkpoint (the first `layers` layers), embedding first."""
    infos = [TensorInfo.of("model.embed_tokens.weight", (VOCAB, HIDDEN), "bfloat16")]
    for layer in range(layers):
        infos += layer_infos(layer if layers == LAYERS + 1 or layer < layers - 1 else LAYERS)
    infos.append(_norm("model.norm", HIDDEN))
    infos.append(TensorInfo.of("lm_head.weight", (VOCAB, HIDDEN), "bfloat16"))
    return infos


def make_header_only(folder: str | os.PathLike[str], layers: int = LAYERS + 1) -> Path:
    """Write the sharded checkpoint's headers and index at `folder`; data stays sparse."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    shards = plan_shards(root, deepseek_v3_infos(layers), SHARD_BYTES)
    for final, group in shards.shards:
        header, _ = build_header(group, path=str(final))
        with open(final, "wb") as fp:
            fp.write(header)
            fp.truncate(len(header) + sum(info.nbytes for info in group))
    if shards.index is not None:
        shards.index.write_bytes(index_json(shards))
    return root
