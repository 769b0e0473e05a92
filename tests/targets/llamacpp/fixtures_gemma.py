"""Small Gemma, Gemma 2 and Gemma 3 (text) model folders in the real layout: config.json as
Google's releases spell it, safetensors shards in transformers' state-dict order, random
weights; builds on hf_fixtures (checkpoint writing) and tokenizer_fixtures (tokenizers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_sentencepiece_tokenizer

GEMMA_KINDS = ("gemma", "gemma2", "gemma3")
HF_NAMES = {
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
}
HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 64, 3, 4, 2, 16, 128


def gemma_config(kind: str, vocab: int, tied: bool = True, **changes: Any) -> dict[str, Any]:
    """config.json of a tiny model of `kind`, keyed as the hub's releases of it are."""
    config: dict[str, Any] = {
        "architectures": [HF_NAMES[kind]],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "head_dim": HEAD_DIM,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "intermediate_size": FFN,
        "max_position_embeddings": 8192,
        "model_type": "gemma3_text" if kind == "gemma3" else kind,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": KV_HEADS,
        "pad_token_id": 0,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
        "vocab_size": vocab,
    }
    if kind == "gemma2":
        config.update(attn_logit_softcapping=50.0, final_logit_softcapping=30.0, sliding_window=64)
        config["query_pre_attn_scalar"] = 256
    if kind == "gemma3":
        config.update(rope_theta=1000000.0, rope_local_base_freq=10000.0, sliding_window=64)
        config.update(sliding_window_pattern=6, attn_logit_softcapping=None)
        config.update(final_logit_softcapping=None, max_position_embeddings=32768)
    config.update(changes)
    return config


def gemma_tensor_shapes(kind: str, vocab: int, tied: bool = True) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensors in the order transformers saves them (names sorted)."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    layer: dict[str, tuple[int, ...]] = {
        "input_layernorm.weight": (HIDDEN,),
        "mlp.down_proj.weight": (HIDDEN, FFN),
        "mlp.gate_proj.weight": (FFN, HIDDEN),
        "mlp.up_proj.weight": (FFN, HIDDEN),
        "post_attention_layernorm.weight": (HIDDEN,),
        "self_attn.k_proj.weight": (kv, HIDDEN),
        "self_attn.o_proj.weight": (HIDDEN, q),
        "self_attn.q_proj.weight": (q, HIDDEN),
        "self_attn.v_proj.weight": (kv, HIDDEN),
    }
    if kind != "gemma":
        layer["post_feedforward_layernorm.weight"] = (HIDDEN,)
        layer["pre_feedforward_layernorm.weight"] = (HIDDEN,)
    if kind == "gemma3":
        layer["self_attn.q_norm.weight"] = (HEAD_DIM,)
        layer["self_attn.k_norm.weight"] = (HEAD_DIM,)
    out: dict[str, tuple[int, ...]] = {} if tied else {"lm_head.weight": (vocab, HIDDEN)}
    out["model.embed_tokens.weight"] = (vocab, HIDDEN)
    for i in range(LAYERS):
        out.update({f"model.layers.{i}.{name}": layer[name] for name in sorted(layer)})
    out["model.norm.weight"] = (HIDDEN,)
    return out


def gemma_weights(
    kind: str, vocab: int, tied: bool = True, dtype: Any = ml_dtypes.bfloat16, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random weights; norms hold Gemma's offsets from one (small, of either sign)."""
    rng = np.random.default_rng(seed)
    return {
        name: (rng.standard_normal(dims, dtype=np.float32) * 0.5).astype(dtype)
        for name, dims in gemma_tensor_shapes(kind, vocab, tied).items()
    }


def write_gemma(
    folder: Path,
    kind: str,
    vocab: int = 400,
    tied: bool = True,
    dtype: Any = ml_dtypes.bfloat16,
    **changes: Any,
) -> tuple[Path, dict[str, np.ndarray]]:
    """A model folder of `kind` without tokenizer, and its weights."""
    weights = gemma_weights(kind, vocab, tied, dtype)
    config = gemma_config(kind, vocab, tied, **changes)
    return write_checkpoint(folder, weights, config, shards=3), weights


def write_gemma_with_tokenizer(
    folder: Path, kind: str, tied: bool = True, **changes: Any
) -> tuple[Path, dict[str, np.ndarray]]:
    """A model folder of `kind` with a trained sentencepiece tokenizer.model."""
    vocab = write_sentencepiece_tokenizer(folder, 400)
    return write_gemma(folder, kind, vocab, tied, **changes)


def write_gemma3_multimodal(
    folder: Path, vocab: int = 400, **text_changes: Any
) -> tuple[Path, dict[str, np.ndarray]]:
    """A Gemma3ForConditionalGeneration folder as Google ships it: the text model's config in
    `text_config`, its tensors under `language_model.`, a (tiny) vision tower and projector.
    Returns the folder and the text model's weights by their Gemma3ForCausalLM names."""
    text = gemma_weights("gemma3", vocab)
    rng = np.random.default_rng(1)
    vision = {
        "multi_modal_projector.mm_input_projection_weight": (32, HIDDEN),
        "multi_modal_projector.mm_soft_emb_norm.weight": (32,),
        "vision_tower.vision_model.embeddings.patch_embedding.weight": (32, 3, 8, 8),
        "vision_tower.vision_model.post_layernorm.weight": (32,),
    }
    weights = {f"language_model.{name}": value for name, value in text.items()}
    for name, dims in vision.items():
        weights[name] = rng.standard_normal(dims, dtype=np.float32).astype(ml_dtypes.bfloat16)
    text_config = gemma_config("gemma3", vocab, **text_changes)
    for key in ("architectures", "torch_dtype", "bos_token_id", "eos_token_id", "pad_token_id"):
        text_config.pop(key, None)
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "boi_token_index": 255999,
        "eoi_token_index": 256000,
        "eos_token_id": [1, 106],
        "image_token_index": 262144,
        "mm_tokens_per_image": 4,
        "model_type": "gemma3",
        "text_config": text_config,
        "torch_dtype": "bfloat16",
        "vision_config": {"hidden_size": 32, "model_type": "siglip_vision_model", "patch_size": 8},
    }
    return write_checkpoint(folder, dict(sorted(weights.items())), config, shards=3), text
