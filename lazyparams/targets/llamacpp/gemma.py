"""gemma: GemmaForCausalLM. Llama's layout without the rotary permutation, tied embeddings.

Gemma's RMS norms scale by `1 + weight`, llama.cpp's by `weight`: every norm is written plus
one (`norm_plus_one`). The converter leaves `lm_head` out and writes its own hyperparameters in
its own order (`gemma_hparams`), from config.json with the defaults transformers' config class
adds (`with_defaults`). Also the pieces gemma2 and gemma3 reuse. Imports the tables, the llama
table and the errors; the hook uses only the methods of the tensor it is given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.llama import DENSE_MLP
from lazyparams.targets.llamacpp.tables import Architecture, HookContext, TensorRule

_WIDE_FLOATS = ("float16", "float32")


def norm_plus_one(tensor: Any, context: HookContext) -> Any:
    """`1 + weight` of a Gemma RMS norm, computed as the converter computes it: in float32,
    or in the checkpoint's own float16 / float32."""
    del context  # the sum needs nothing of the config
    if tensor.dtype not in _WIDE_FLOATS:
        tensor = tensor.astype("float32")
    return tensor + 1.0


def norm_rule(hf: str, gguf: str) -> TensorRule:
    """A Gemma norm (per layer when `hf` holds `{bid}`), written plus one."""
    return TensorRule(hf, gguf, hook=norm_plus_one)


def layer_rule(hf: str, gguf: str, **options: Any) -> TensorRule:
    """`model.layers.{bid}.<hf>` -> `blk.{bid}.<gguf>`."""
    return TensorRule(f"model.layers.{{bid}}.{hf}", f"blk.{{bid}}.{gguf}", **options)


def layer_norm(hf: str, gguf: str) -> TensorRule:
    """A per-layer Gemma norm, written plus one."""
    return layer_rule(hf, gguf, hook=norm_plus_one)


ATTENTION = tuple(
    layer_rule(f"self_attn.{p}_proj.weight", f"attn_{g}.weight")
    for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))
)
"""q, k, v and o, not permuted (llama.cpp's Gemma graphs use Hugging Face's rotary layout)."""

MLP = tuple(layer_rule(hf, gguf) for hf, gguf, _ in DENSE_MLP)

EMBEDDINGS = TensorRule("model.embed_tokens.weight", "token_embd.weight")
OUTPUT_NORM = norm_rule("model.norm.weight", "output_norm.weight")

SKIPPED = (".rotary_emb.inv_freq", ".attention.masked_bias", "lm_head.weight")
"""The converter drops lm_head (Gemma ties it to the embeddings; some exports carry a copy)."""

_DEFAULTS = {
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "head_dim": 256,
    "num_key_value_heads": 16,
}
"""transformers' GemmaConfig defaults for the keys the converter reads that config.json may
leave out (the converter reads config.json through that class)."""


def with_defaults(defaults: Mapping[str, Any]) -> Any:
    """A config hook: config.json with `defaults` for the keys it lacks (a null stays null,
    as transformers keeps it, and is refused where a key needs a number)."""

    def hook(config: Mapping[str, Any]) -> dict[str, Any]:
        filled = dict(config)
        for key, value in defaults.items():
            filled.setdefault(key, value)
        return filled

    return hook


def config_number(config: Mapping[str, Any], key: str, config_path: Path, kind: str) -> Any:
    """config[key] checked to be a number (a non-negative integer for UINT32)."""
    value = config.get(key)
    number = (int,) if kind == "UINT32" else (int, float)
    if isinstance(value, bool) or not isinstance(value, number) or value < 0:
        what = "non-negative integer" if kind == "UINT32" else "non-negative number"
        raise ConvertError(f"{config_path}: expected a {what} {key!r}, got {value!r}")
    return value


GEMMA_KEYS = (
    ("context_length", "max_position_embeddings", "UINT32"),
    ("embedding_length", "hidden_size", "UINT32"),
    ("block_count", "num_hidden_layers", "UINT32"),
    ("feed_forward_length", "intermediate_size", "UINT32"),
    ("attention.head_count", "num_attention_heads", "UINT32"),
    ("attention.head_count_kv", "num_key_value_heads", "UINT32"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps", "FLOAT32"),
    ("attention.key_length", "head_dim", "UINT32"),
    ("attention.value_length", "head_dim", "UINT32"),
)
"""(key, config.json key, GGUF type) of the keys Gemma and Gemma 2 write, in their order."""


def hparams_of(
    arch: str, keys: tuple[tuple[str, str, str], ...], config: Mapping[str, Any], path: Path
) -> Iterator[tuple[str, str, Any]]:
    """`{arch}.<key>` from its config.json key, for each of `keys`."""
    for key, source, kind in keys:
        yield f"{arch}.{key}", kind, config_number(config, source, path, kind)


def gemma_hparams(
    config: Mapping[str, Any], config_path: Path, file_type: int
) -> Iterator[tuple[str, str, Any]]:
    """Gemma's hyperparameters and the file type, in the converter's order."""
    yield from hparams_of("gemma", GEMMA_KEYS, config, config_path)
    yield "general.file_type", "UINT32", file_type


ARCH = Architecture(
    gguf_arch="gemma",
    hf_names=("GemmaForCausalLM",),
    tensors=(
        EMBEDDINGS,
        OUTPUT_NORM,
        layer_norm("input_layernorm.weight", "attn_norm.weight"),
        *ATTENTION,
        layer_norm("post_attention_layernorm.weight", "ffn_norm.weight"),
        *MLP,
    ),
    skipped=SKIPPED,
    config_hook=with_defaults(_DEFAULTS),
    hparams_writer=gemma_hparams,
)
