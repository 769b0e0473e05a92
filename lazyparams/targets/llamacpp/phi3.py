"""phi3: Phi3ForCausalLM (Phi-3, Phi-3.5, Phi-4 and Phi-4-mini).

Attention keeps Hugging Face's fused `qkv_proj` and the feed-forward its fused `gate_up_proj`:
llama.cpp's phi3 graph reads them as one `attn_qkv` and one `ffn_up` (gate rows first) and
splits them itself, so the converter writes both as they are, without the rotary permutation;
the hooks check their rows against the config before any data is read. The converter class
writes its own hyperparameters in its own order, the sliding window (0 for Phi-4), and for a
long-context (`longrope`) model the rotary frequency factors as two F32 tensors and the
attention factor. Config defaults are transformers' Phi3Config's, which the converter reads
config.json through. Imports the tables, the llama table, the hyperparameter helpers and the
errors; numpy only for a long-context model's factors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import first_present, rope_parameters
from lazyparams.targets.llamacpp.llama import OUTER
from lazyparams.targets.llamacpp.tables import Architecture, HookContext, TensorHook, TensorRule

if TYPE_CHECKING:
    import numpy as np

# transformers' Phi3Config defaults, which the converter sees for keys config.json lacks
_DEFAULT_CONTEXT = 4096
_DEFAULT_THETA = 10000.0
_DEFAULT_RMS_EPS = 1e-5
_LONG_ROPE = ("longrope", "su", "yarn")  # Phi3Config reads su and yarn as longrope

ROPE_FACTORS_LONG = "rope_factors_long.weight"
ROPE_FACTORS_SHORT = "rope_factors_short.weight"
_ORIGINAL = ("original_max_position_embeddings",)


def _positive(config: Mapping[str, Any], keys: tuple[str, ...], path: Path, default: Any) -> int:
    """The first of `keys` in config.json (else `default`), checked to be a positive integer."""
    value = first_present(config, keys)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConvertError(f"{path}: expected a positive integer {keys[0]!r}, got {value!r}")
    return value


def _number(value: Any, key: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConvertError(f"{path}: expected a number {key!r}, got {value!r}")
    return float(value)


def phi3_rope(config: Mapping[str, Any]) -> dict[str, Any]:
    """The rope settings as Phi3Config gives them to the converter: theta (10000), partial
    rotary factor (1.0), type (su and yarn read as longrope) and the original context, which
    for longrope is always the top-level `original_max_position_embeddings` (4096)."""
    rope = rope_parameters(config)
    rope.setdefault("rope_theta", _DEFAULT_THETA)
    rope.setdefault("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    kind = str(rope.get("rope_type") or "default").lower()
    rope["rope_type"] = "longrope" if kind in _LONG_ROPE else kind
    top = config.get("original_max_position_embeddings", _DEFAULT_CONTEXT)
    if rope["rope_type"] == "longrope" or "original_max_position_embeddings" not in rope:
        rope["original_max_position_embeddings"] = top
    return rope


def rope_dims(config: Mapping[str, Any], path: Path) -> int:
    """The rotary width per head: partial_rotary_factor x hidden_size // num_attention_heads."""
    hidden = _positive(config, ("hidden_size", "n_embd"), path, None)
    heads = _positive(config, ("num_attention_heads", "n_head"), path, None)
    share = _number(phi3_rope(config)["partial_rotary_factor"], "partial_rotary_factor", path)
    return int(share * hidden) // heads


def phi3_hparams(
    config: Mapping[str, Any], path: Path, file_type: int
) -> Iterator[tuple[str, str, Any]]:
    """Every phi3 hyperparameter in the converter class's order, the file type among them."""
    heads = _positive(config, ("num_attention_heads", "n_head"), path, None)
    rope = phi3_rope(config)
    yield "phi3.context_length", "UINT32", _context(config, path)
    original = _positive(rope, _ORIGINAL, path, None)
    yield "phi3.rope.scaling.original_context_length", "UINT32", original
    yield (
        "phi3.embedding_length",
        "UINT32",
        _positive(config, ("hidden_size", "n_embd"), path, None),
    )
    yield (
        "phi3.feed_forward_length",
        "UINT32",
        _positive(config, ("intermediate_size",), path, None),
    )
    yield "phi3.block_count", "UINT32", _positive(config, ("num_hidden_layers",), path, None)
    yield "phi3.attention.head_count", "UINT32", heads
    kv = _positive(config, ("num_key_value_heads", "n_head_kv"), path, heads)
    yield "phi3.attention.head_count_kv", "UINT32", kv
    eps = _number(config.get("rms_norm_eps", _DEFAULT_RMS_EPS), "rms_norm_eps", path)
    yield "phi3.attention.layer_norm_rms_epsilon", "FLOAT32", eps
    yield "phi3.rope.dimension_count", "UINT32", rope_dims(config, path)
    yield "phi3.rope.freq_base", "FLOAT32", _number(rope["rope_theta"], "rope_theta", path)
    yield "general.file_type", "UINT32", file_type
    # 0 tells Phi-4 (no sliding window) from the other phi3 models
    window = config.get("sliding_window")
    window = 0 if window is None else window
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConvertError(
            f"{path}: expected a non-negative integer 'sliding_window', got {window!r}"
        )
    yield "phi3.attention.sliding_window", "UINT32", window


def _context(config: Mapping[str, Any], path: Path) -> int:
    keys = ("n_positions", "max_position_embeddings")
    return _positive(config, keys, path, _DEFAULT_CONTEXT)


def _long_factors(config: Mapping[str, Any], path: Path) -> tuple[list[float], list[float]] | None:
    """A long-context model's (long, short) rotary factors, checked; None for other models."""
    rope = phi3_rope(config)
    long, short = rope.get("long_factor"), rope.get("short_factor")
    if not long:
        return None
    if rope["rope_type"] != "longrope":
        raise ConvertError(
            f"{path}: rope long_factor is given with rope type {rope['rope_type']!r}; llama.cpp's "
            "phi3 reads the factors of longrope (su, yarn) only"
        )
    return _factor_list(long, "long_factor", config, path), _factor_list(
        short, "short_factor", config, path
    )


def _factor_list(factors: Any, key: str, config: Mapping[str, Any], path: Path) -> list[float]:
    """One list of rotary factors, checked to hold rope.dimension_count / 2 numbers."""
    half = rope_dims(config, path) / 2
    if not isinstance(factors, list) or len(factors) != half:
        raise ConvertError(
            f"{path}: rope {key} must list rope.dimension_count / 2 = {half:g} numbers "
            f"(partial_rotary_factor x hidden_size // num_attention_heads, halved), "
            f"got {factors!r}"
        )
    return [_number(value, key, path) for value in factors]


def phi3_attn_factor(config: Mapping[str, Any], path: Path) -> Iterator[tuple[str, str, Any]]:
    """`rope.scaling.attn_factor` of a long-context model, which the converter writes as it
    makes the factor tensors: sqrt(1 + ln(scale) / ln(original context)) for a context longer
    than the original one, else 1."""
    if _long_factors(config, path) is None:
        return
    original = _positive(phi3_rope(config), _ORIGINAL, path, None)
    scale = _context(config, path) / original
    factor = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0
    yield "rope.scaling.attn_factor", "FLOAT32", factor


def phi3_rope_factors(config: Mapping[str, Any], path: Path) -> dict[str, np.ndarray]:
    """The long and short rotary factors of a long-context model as F32 vectors, written
    before the checkpoint's tensors; none for other models."""
    factors = _long_factors(config, path)
    if factors is None:
        return {}
    import numpy as np  # for the factor vectors, only where there are factors

    long, short = factors
    return {
        ROPE_FACTORS_LONG: np.asarray(long, dtype=np.float32),
        ROPE_FACTORS_SHORT: np.asarray(short, dtype=np.float32),
    }


def _rows_error(context: HookContext, tensor: Any, expected: int, why: str) -> ConvertError:
    return ConvertError(
        f"tensor {context.name!r} has shape {tuple(tensor.shape)}, but {context.config_path} "
        f"says {why} = {expected} rows"
    )


def fused_qkv(tensor: Any, context: HookContext) -> Any:
    """attn_qkv: qkv_proj as it is, its rows checked to be q, k and v heads of one width."""
    config, path = context.config, context.config_path
    heads = _positive(config, ("num_attention_heads", "n_head"), path, None)
    kv = _positive(config, ("num_key_value_heads", "n_head_kv"), path, heads)
    width = _positive(config, ("hidden_size", "n_embd"), path, None) // heads
    expected = (heads + 2 * kv) * width
    if tensor.ndim != 2 or tensor.shape[0] != expected:
        why = (
            f"(num_attention_heads={heads} + 2 x num_key_value_heads={kv}) x "
            f"(hidden_size // num_attention_heads = {width})"
        )
        raise _rows_error(context, tensor, expected, why)
    return tensor


def fused_gate_up(tensor: Any, context: HookContext) -> Any:
    """ffn_up: gate_up_proj as it is (gate rows, then up rows), checked against the config."""
    size = _positive(context.config, ("intermediate_size",), context.config_path, None)
    if tensor.ndim != 2 or tensor.shape[0] != 2 * size:
        raise _rows_error(context, tensor, 2 * size, f"2 x intermediate_size={size}")
    return tensor


def _layer(hf: str, gguf: str, hook: TensorHook | None = None) -> TensorRule:
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", hook=hook)


LAYER = (
    _layer("input_layernorm.weight", "attn_norm.weight"),
    _layer("self_attn.qkv_proj.weight", "attn_qkv.weight", fused_qkv),
    _layer("self_attn.o_proj.weight", "attn_output.weight"),
    _layer("post_attention_layernorm.weight", "ffn_norm.weight"),
    _layer("mlp.gate_up_proj.weight", "ffn_up.weight", fused_gate_up),
    _layer("mlp.down_proj.weight", "ffn_down.weight"),
)

ARCH = Architecture(
    gguf_arch="phi3",
    hf_names=("Phi3ForCausalLM",),
    tensors=(*OUTER, *LAYER),
    hparams_writer=phi3_hparams,
    early_hparams=phi3_attn_factor,
    extra_tensors=phi3_rope_factors,
)
