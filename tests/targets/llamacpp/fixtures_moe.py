"""Fixtures of the GLM-4.5 (glm4moe), ERNIE-4.5-MoE, OLMoE, Llama-4 (text) and GPT-OSS families:
config.json as transformers writes it, tensors in the checkpoint's layout (per-expert tensors,
or the fused expert tensors Llama-4 and GPT-OSS ship), and GLM's tokenizer with the special
tokens its converter looks up. Builds on hf_fixtures and tokenizer_fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizer_fixtures import _added_token, write_bpe_tokenizer

GLM_SPECIALS = ["[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
"""The added tokens GLM-4.5's converter reads by name (bos, eot, eom) besides <|endoftext|>."""


def write_glm_tokenizer(folder: Path, vocab_size: int) -> int:
    """A byte-level BPE tokenizer.json (Qwen2's split) with GLM-4.5's added special tokens;
    returns its vocab size."""
    from tokenizers import Tokenizer

    write_bpe_tokenizer(folder, vocab_size - len(GLM_SPECIALS), "qwen2")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.add_special_tokens(GLM_SPECIALS)
    tokenizer.save(str(folder / "tokenizer.json"))
    config_path = folder / "tokenizer_config.json"
    config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
    for text in GLM_SPECIALS:
        config["added_tokens_decoder"][str(tokenizer.token_to_id(text))] = _added_token(text)
    config.update(eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    config["additional_special_tokens"] = GLM_SPECIALS
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return int(tokenizer.get_vocab_size(with_added_tokens=True))


HIDDEN, HEADS, KV_HEADS, LAYERS, EXPERTS, VOCAB = 64, 4, 2, 3, 4, 512
_ATTENTION_NAMES = ("q", "k", "v", "o")


def _config(arch: str, model_type: str, **extra: Any) -> dict[str, Any]:
    """config.json as transformers 5 writes it: the shared keys, then the family's."""
    return {
        "architectures": [arch],
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "max_position_embeddings": 4096,
        "model_type": model_type,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "transformers_version": "5.25.0",
        "vocab_size": VOCAB,
        **extra,
    }


def _attention(prefix: str, head_dim: int, bias: bool = False) -> dict[str, tuple[int, ...]]:
    """q/k/v/o projections of a layer (and q/k/v biases)."""
    rows = {"q": HEADS * head_dim, "k": KV_HEADS * head_dim, "v": KV_HEADS * head_dim}
    out: dict[str, tuple[int, ...]] = {}
    for p in _ATTENTION_NAMES:
        out[f"{prefix}.self_attn.{p}_proj.weight"] = (
            (HIDDEN, HEADS * head_dim) if p == "o" else (rows[p], HIDDEN)
        )
        if bias and p != "o":
            out[f"{prefix}.self_attn.{p}_proj.bias"] = (rows[p],)
    return out


def _mlp(prefix: str, width: int) -> dict[str, tuple[int, ...]]:
    """gate/up/down projections of width `width` under `prefix`."""
    return {
        f"{prefix}.gate_proj.weight": (width, HIDDEN),
        f"{prefix}.up_proj.weight": (width, HIDDEN),
        f"{prefix}.down_proj.weight": (HIDDEN, width),
    }


def _experts(prefix: str, width: int) -> dict[str, tuple[int, ...]]:
    """Per-expert gate/up/down projections, expert by expert."""
    out: dict[str, tuple[int, ...]] = {}
    for x in range(EXPERTS):
        out.update(_mlp(f"{prefix}.experts.{x}", width))
    return out


def _outer(tied: bool = False) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """The embedding (first) and the final norm and lm_head (last)."""
    last: dict[str, tuple[int, ...]] = {"model.norm.weight": (HIDDEN,)}
    if not tied:
        last["lm_head.weight"] = (VOCAB, HIDDEN)
    return {"model.embed_tokens.weight": (VOCAB, HIDDEN)}, last


GLM_HEAD_DIM, GLM_FFN, GLM_MOE_FFN = 32, 160, 32


def glm4moe_layout(mtp: bool = False) -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """GLM-4.5: one dense lead layer, then experts (and, with `mtp`, the prediction layer 3)."""
    config = _config(
        "Glm4MoeForCausalLM",
        "glm4_moe",
        attention_bias=True,
        first_k_dense_replace=1,
        head_dim=GLM_HEAD_DIM,
        intermediate_size=GLM_FFN,
        moe_intermediate_size=GLM_MOE_FFN,
        n_group=1,
        n_routed_experts=EXPERTS,
        n_shared_experts=1,
        norm_topk_prob=True,
        num_experts_per_tok=2,
        num_nextn_predict_layers=1,
        rope_parameters={
            "partial_rotary_factor": 0.5,
            "rope_theta": 10000.0,
            "rope_type": "default",
        },
        routed_scaling_factor=2.5,
        topk_group=1,
        use_qk_norm=True,
    )
    first, last = _outer()
    layers: dict[str, tuple[int, ...]] = {}
    for i in range(LAYERS + int(mtp)):
        p = f"model.layers.{i}"
        layers[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        layers.update(_attention(p, GLM_HEAD_DIM, bias=True))
        layers[f"{p}.self_attn.q_norm.weight"] = (GLM_HEAD_DIM,)
        layers[f"{p}.self_attn.k_norm.weight"] = (GLM_HEAD_DIM,)
        if i == 0:
            layers.update(_mlp(f"{p}.mlp", GLM_FFN))
        else:
            layers[f"{p}.mlp.gate.weight"] = (EXPERTS, HIDDEN)
            layers[f"{p}.mlp.gate.e_score_correction_bias"] = (EXPERTS,)
            layers.update(_experts(f"{p}.mlp", GLM_MOE_FFN))
            layers.update(_mlp(f"{p}.mlp.shared_experts", GLM_MOE_FFN))
        layers[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
        if i == LAYERS:
            layers[f"{p}.eh_proj.weight"] = (HIDDEN, 2 * HIDDEN)
            layers[f"{p}.embed_tokens.weight"] = (VOCAB, HIDDEN)
            layers[f"{p}.enorm.weight"] = (HIDDEN,)
            layers[f"{p}.hnorm.weight"] = (HIDDEN,)
            layers[f"{p}.shared_head.head.weight"] = (VOCAB, HIDDEN)
            layers[f"{p}.shared_head.norm.weight"] = (HIDDEN,)
    return config, {**first, **layers, **last}


def random_tensors(shapes: dict[str, tuple[int, ...]], seed: int = 0) -> dict[str, Any]:
    """bfloat16 random weights of the shapes (norms near 1)."""
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(seed)
    out = {}
    for name, dims in shapes.items():
        values = rng.standard_normal(dims, dtype=np.float32) * 0.05
        if "norm" in name:
            values += 1.0
        out[name] = values.astype(ml_dtypes.bfloat16)
    return out


OLMOE_FFN = 32


def olmoe_layout() -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """OLMoE: every layer a mixture of experts; q/k norms over the whole projection."""
    config = _config(
        "OlmoeForCausalLM",
        "olmoe",
        intermediate_size=OLMOE_FFN,
        norm_topk_prob=False,
        num_experts=EXPERTS,
        num_experts_per_tok=2,
        rms_norm_eps=1e-06,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
    )
    dim = HIDDEN // HEADS
    first, last = _outer()
    layers: dict[str, tuple[int, ...]] = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        layers[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        layers.update(_experts(f"{p}.mlp", OLMOE_FFN))
        layers[f"{p}.mlp.gate.weight"] = (EXPERTS, HIDDEN)
        layers[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
        layers.update(_attention(p, dim))
        layers[f"{p}.self_attn.q_norm.weight"] = (HEADS * dim,)
        layers[f"{p}.self_attn.k_norm.weight"] = (KV_HEADS * dim,)
    return config, {**first, **layers, **last}


ERNIE_FFN, ERNIE_MOE_FFN = 160, 32


def ernie45moe_layout(mtp: bool = False) -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """ERNIE-4.5-MoE: a dense layer 0, then experts; tied embeddings; with `mtp`, the
    multi-token-prediction tensors ERNIE ships outside the layers."""
    config = _config(
        "Ernie4_5_MoeForCausalLM",
        "ernie4_5_moe",
        intermediate_size=ERNIE_FFN,
        moe_intermediate_size=ERNIE_MOE_FFN,
        moe_k=2,
        moe_layer_end_index=LAYERS - 1,
        moe_layer_interval=1,
        moe_layer_start_index=1,
        moe_num_experts=EXPERTS,
        moe_num_shared_experts=2,
        rope_parameters={"rope_theta": 500000.0, "rope_type": "default"},
        tie_word_embeddings=True,
        use_bias=False,
    )
    dim = HIDDEN // HEADS
    first, last = _outer(tied=True)
    layers: dict[str, tuple[int, ...]] = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        layers[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        if i == 0:
            layers.update(_mlp(f"{p}.mlp", ERNIE_FFN))
        else:
            layers.update(_experts(f"{p}.mlp", ERNIE_MOE_FFN))
            layers[f"{p}.mlp.gate.weight"] = (EXPERTS, HIDDEN)
            layers[f"{p}.mlp.moe_statics.e_score_correction_bias"] = (1, EXPERTS)
            layers.update(_mlp(f"{p}.mlp.shared_experts", 2 * ERNIE_MOE_FFN))
        layers[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
        layers.update(_attention(p, dim))
    if mtp:
        layers["model.mtp_block.0.self_attn.q_proj.weight"] = (HIDDEN, HIDDEN)
        layers["model.mtp_emb_norm.0.weight"] = (HIDDEN,)
        layers["model.mtp_hidden_norm.0.weight"] = (HIDDEN,)
        layers["model.mtp_linear_proj.0.weight"] = (HIDDEN, 2 * HIDDEN)
    return config, {**first, **layers, **last}


LLAMA4_HEAD_DIM, LLAMA4_MOE_FFN, LLAMA4_FFN = 16, 32, 96
LLAMA3_ROPE = {
    "factor": 8.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 1024,
    "rope_theta": 500000.0,
    "rope_type": "llama3",
}


def llama4_layout() -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """Llama-4 text: experts in layer 1 (every second layer), stored fused per layer."""
    config = _config(
        "Llama4ForCausalLM",
        "llama4_text",
        head_dim=LLAMA4_HEAD_DIM,
        interleave_moe_layer_step=2,
        intermediate_size=LLAMA4_MOE_FFN,
        intermediate_size_mlp=LLAMA4_FFN,
        layer_types=["chunked_attention", "chunked_attention", "full_attention"],
        moe_layers=[1],
        num_experts_per_tok=1,
        num_local_experts=EXPERTS,
        rope_parameters=LLAMA3_ROPE,
        use_qk_norm=True,
    )
    first, last = _outer()
    layers: dict[str, tuple[int, ...]] = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        if i == 1:
            f = f"{p}.feed_forward"
            layers[f"{f}.experts.gate_up_proj"] = (EXPERTS, HIDDEN, 2 * LLAMA4_MOE_FFN)
            layers[f"{f}.experts.down_proj"] = (EXPERTS, LLAMA4_MOE_FFN, HIDDEN)
            layers[f"{f}.router.weight"] = (EXPERTS, HIDDEN)
            layers.update(_mlp(f"{f}.shared_expert", LLAMA4_MOE_FFN))
        else:
            layers.update(_mlp(f"{p}.feed_forward", LLAMA4_FFN))
        layers[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        layers[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
        layers.update(_attention(p, LLAMA4_HEAD_DIM))
    return config, {**first, **layers, **last}


GPTOSS_HEAD_DIM, GPTOSS_FFN = 16, 64


def gptoss_layout() -> tuple[dict[str, Any], dict[str, tuple[int, ...]]]:
    """gpt-oss with float experts (as transformers saves a dequantized model): fused per layer,
    gate and up interleaved, with biases; attention sinks; yarn rope."""
    config = _config(
        "GptOssForCausalLM",
        "gpt_oss",
        attention_bias=True,
        head_dim=GPTOSS_HEAD_DIM,
        intermediate_size=GPTOSS_FFN,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        num_experts_per_tok=2,
        num_local_experts=EXPERTS,
        rope_parameters={
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_theta": 150000.0,
            "rope_type": "yarn",
            "truncate": False,
        },
        sliding_window=128,
        swiglu_limit=7.0,
    )
    first, last = _outer()
    layers: dict[str, tuple[int, ...]] = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        e = f"{p}.mlp.experts"
        layers[f"{p}.input_layernorm.weight"] = (HIDDEN,)
        layers[f"{e}.down_proj"] = (EXPERTS, GPTOSS_FFN, HIDDEN)
        layers[f"{e}.down_proj_bias"] = (EXPERTS, HIDDEN)
        layers[f"{e}.gate_up_proj"] = (EXPERTS, HIDDEN, 2 * GPTOSS_FFN)
        layers[f"{e}.gate_up_proj_bias"] = (EXPERTS, 2 * GPTOSS_FFN)
        layers[f"{p}.mlp.router.bias"] = (EXPERTS,)
        layers[f"{p}.mlp.router.weight"] = (EXPERTS, HIDDEN)
        layers[f"{p}.post_attention_layernorm.weight"] = (HIDDEN,)
        layers.update(_attention(p, GPTOSS_HEAD_DIM, bias=True))
        layers[f"{p}.self_attn.o_proj.bias"] = (HIDDEN,)
        layers[f"{p}.self_attn.sinks"] = (HEADS,)
    return config, {**first, **layers, **last}
