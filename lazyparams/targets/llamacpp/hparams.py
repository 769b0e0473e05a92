"""GGUF metadata from config.json: `general.*` and the hyperparameters llama.cpp reads.

The keys, their config.json sources, their GGUF types and their order are those llama.cpp's
converter writes for the architectures in this package: the common text-model keys, rope
scaling, then the architecture's own. `general.*` comes from gguf-py's `Metadata` (folder name,
model card), as the converter takes it. Imports gguf and the tables.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gguf
from gguf import GGUFValue, GGUFValueType

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.tables import Architecture, HParam

LAYER_COUNT_KEYS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers")
HEAD_COUNT_KEYS = ("num_attention_heads", "n_head", "n_heads")
KV_HEAD_COUNT_KEYS = ("num_key_value_heads", "n_kv_heads")
HIDDEN_KEYS = ("hidden_size", "n_embd", "dim")

COMMON: tuple[HParam, ...] = (
    HParam("block_count", LAYER_COUNT_KEYS, required=True),
    HParam(
        "context_length",
        (
            "max_position_embeddings",
            "n_ctx",
            "n_positions",
            "max_length",
            "max_sequence_length",
            "model_max_length",
        ),
    ),
    HParam("embedding_length", HIDDEN_KEYS, required=True),
    HParam(
        "feed_forward_length",
        (
            "prefix_dense_intermediate_size",
            "dense_intermediate_size",
            "intermediate_size",
            "n_inner",
            "hidden_dim",
        ),
    ),
    HParam("attention.head_count", HEAD_COUNT_KEYS, required=True),
    HParam("attention.head_count_kv", KV_HEAD_COUNT_KEYS),
)
"""The hyperparameters every text model writes first, in llama.cpp's order."""

AFTER_ROPE: tuple[HParam, ...] = (
    HParam("attention.layer_norm_rms_epsilon", ("rms_norm_eps", "norm_eps"), "FLOAT32"),
    HParam(
        "attention.layer_norm_epsilon",
        ("layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"),
        "FLOAT32",
    ),
    HParam("expert_count", ("num_local_experts", "num_experts", "n_routed_experts")),
    HParam("expert_used_count", ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")),
    HParam("expert_group_count", ("n_group",)),
    HParam("expert_group_used_count", ("topk_group",)),
    HParam("attention.key_length", ("head_dim",)),
    HParam("attention.value_length", ("head_dim",)),
)
"""The hyperparameters after rope's, up to the file type."""

_YARN_EXTRAS = (
    ("yarn_ext_factor", ("extrapolation_factor",)),
    ("yarn_attn_factor", ("attention_factor", "attn_factor")),
    ("yarn_beta_fast", ("beta_fast",)),
    ("yarn_beta_slow", ("beta_slow",)),
)


def first_present(config: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of `keys` in `config`, or None."""
    return next((config[key] for key in keys if key in config), None)


def typed(kind: str, value: Any) -> GGUFValue:
    """`value` as a GGUF value of type `kind` (UINT32, FLOAT32, STRING, BOOL...)."""
    return GGUFValue(value, GGUFValueType[kind])


def general_metadata(
    folder: Path, arch: str, counts: tuple[int, int, int, int]
) -> dict[str, GGUFValue]:
    """`general.architecture`, `general.type` and gguf-py's `general.*` from the folder and
    model card; `counts` are (total, shared, expert, experts) parameters, as llama.cpp counts
    them, for the size label."""
    writer = gguf.GGUFWriter(path=None, arch=arch)
    writer.add_type(gguf.GGUFType.MODEL)
    meta = gguf.Metadata.load(None, folder, None, counts[0])
    meta.name = meta.name or folder.name
    if meta.size_label is None and counts[0] > 0:
        meta.size_label = gguf.size_label(*counts)
    meta.set_gguf_meta_model(writer)
    return dict(writer.kv_data[0])


def parameter_counts(outputs: Sequence[tuple[str, tuple[int, ...]]]) -> tuple[int, int, int, int]:
    """(total, shared, per-expert, experts per expert tensor on average), as llama.cpp counts
    the parameters of the tensors it writes: `_exps.` tensors hold experts on their first axis."""
    total = shared = expert = experts = expert_tensors = 0
    for name, shape in outputs:
        size = 1
        for dim in shape:
            size *= dim
        total += size
        if "_exps." in name and len(shape) >= 3:
            count = shape[1 if ".bias" in name else 0]
            expert += size // count
            experts += count
            expert_tensors += 1
        else:
            shared += size
    return total, shared, expert, experts // expert_tensors if expert_tensors else 0


def model_hparams(
    arch: Architecture, config: Mapping[str, Any], config_path: Path, file_type: int
) -> dict[str, GGUFValue]:
    """The `{arch}.*` hyperparameters and `general.file_type`, in llama.cpp's order."""
    name = arch.gguf_arch
    out: dict[str, GGUFValue] = {}
    out.update(_params(name, COMMON, config, config_path))
    if config.get("is_causal") is False:
        out[f"{name}.attention.causal"] = typed("BOOL", False)
    rope = rope_parameters(config)
    out.update(_rope_scaling(name, rope, config_path))
    if (theta := rope.get("rope_theta")) is not None:
        out[f"{name}.rope.freq_base"] = typed("FLOAT32", theta)
    out.update(_params(name, AFTER_ROPE, config, config_path))
    out["general.file_type"] = typed("UINT32", file_type)
    for extra in arch.extra_hparams:
        out[f"{name}.{extra}"] = typed("UINT32", _extra(extra, config, config_path))
    out["general.quantization_version"] = typed("UINT32", gguf.GGML_QUANT_VERSION)
    return out


def _params(
    arch: str, params: Sequence[HParam], config: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, GGUFValue]]:
    for param in params:
        value = first_present(config, param.config_keys)
        if value is None:
            if param.required:
                raise ConvertError(
                    f"{config_path}: expected one of {', '.join(param.config_keys)} "
                    f"(for {arch}.{param.key}), found none"
                )
            continue
        yield f"{arch}.{param.key}", _checked(param, value, config_path)


def _checked(param: HParam, value: Any, config_path: Path) -> GGUFValue:
    number = (int,) if param.kind.startswith("UINT") else (int, float)
    if isinstance(value, bool) or not isinstance(value, number) or value < 0:
        raise ConvertError(
            f"{config_path}: {param.config_keys[0]!r} (for {param.key}): expected a "
            f"non-negative {'integer' if number == (int,) else 'number'}, got {value!r}"
        )
    return typed(param.kind, value)


def rope_parameters(config: Mapping[str, Any]) -> dict[str, Any]:
    """Rope settings as llama.cpp reads them: `rope_parameters` or `rope_scaling`, with the
    top-level theta and type mirrored in."""
    found = config.get("rope_parameters", config.get("rope_scaling")) or {}
    rope = dict(found) if isinstance(found, Mapping) else {}
    rope = dict(rope.get("full_attention", rope))
    theta = first_present(
        config,
        (
            "global_rope_theta",
            "rope_global_theta",
            "rope_theta_global",
            "rope_theta",
            "rotary_emb_base",
        ),
    )
    if "rope_theta" not in rope and theta is not None:
        rope["rope_theta"] = theta
    if "rope_type" not in rope and rope.get("type") is not None:
        rope["rope_type"] = rope["type"]
    return rope


def _rope_scaling(
    arch: str, rope: Mapping[str, Any], config_path: Path
) -> Iterator[tuple[str, GGUFValue]]:
    kind, factor = rope.get("rope_type"), rope.get("factor")
    if kind not in ("linear", "yarn", "su", "longrope") or (
        kind in ("linear", "yarn") and factor is None
    ):
        return
    prefix = f"{arch}.rope.scaling"
    yield f"{prefix}.type", typed("STRING", "longrope" if kind in ("su", "longrope") else kind)
    if kind == "longrope" or kind == "su":
        return
    yield f"{prefix}.factor", typed("FLOAT32", factor)
    if kind == "yarn":
        original = rope.get("original_max_position_embeddings")
        if original is None:
            raise ConvertError(
                f"{config_path}: yarn rope scaling needs original_max_position_embeddings"
            )
        yield f"{prefix}.original_context_length", typed("UINT32", original)
        for key, sources in _YARN_EXTRAS:
            if (value := first_present(rope, sources)) is not None:
                yield f"{prefix}.{key}", typed("FLOAT32", value)


def _extra(key: str, config: Mapping[str, Any], config_path: Path) -> int:
    if key == "vocab_size":
        value = config.get("vocab_size")
        if not isinstance(value, int):
            raise ConvertError(f"{config_path}: expected an integer 'vocab_size', got {value!r}")
        return value
    return head_dim(config, config_path)


def head_dim(config: Mapping[str, Any], config_path: Path) -> int:
    """The per-head width: `head_dim`, else hidden size over head count."""
    if isinstance(config.get("head_dim"), int):
        return int(config["head_dim"])
    hidden = first_present(config, HIDDEN_KEYS)
    heads = first_present(config, HEAD_COUNT_KEYS)
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0:
        raise ConvertError(f"{config_path}: expected integer hidden_size and num_attention_heads")
    return hidden // heads
