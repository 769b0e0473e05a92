"""GGUF metadata from config.json: `general.*` and the hyperparameters, as GGUF values.

The keys and their order are `hparams`' tables, as llama.cpp's converter writes them: the
common text-model keys, rope scaling, then the architecture's own. `general.*` comes from
gguf-py's `Metadata` (folder name, model card), as the converter takes it. Computed by a
conversion, and by a plan to refuse what the conversion would (it shows none of it); imports
gguf, the tables and the hyperparameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import gguf
from gguf import GGUFValue, GGUFValueType

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.hparams import (
    AFTER_ROPE,
    COMMON,
    YARN_EXTRAS,
    first_present,
    head_dim,
    rope_parameters,
    sliding_rope_theta,
)
from lazyparams.targets.llamacpp.tables import Architecture, HParam


def typed(kind: str, value: Any) -> GGUFValue:
    """`value` as a GGUF value of type `kind` (UINT32, FLOAT32, STRING, BOOL...)."""
    return GGUFValue(value, GGUFValueType[kind])


def general_metadata(
    folder: Path,
    arch: str,
    counts: tuple[int, int, int, int],
    early: Mapping[str, GGUFValue] | None = None,
) -> dict[str, GGUFValue]:
    """`general.architecture`, `general.type` and gguf-py's `general.*` from the folder and
    model card; `counts` are (total, shared, expert, experts) parameters, as llama.cpp counts
    them, for the size label. `early` keys (`early_hparams`) come between the first two."""
    writer = gguf.GGUFWriter(path=None, arch=arch)
    writer.kv_data[0].update(early or {})
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


def early_hparams(
    arch: Architecture, config: Mapping[str, Any], config_path: Path
) -> dict[str, GGUFValue]:
    """The `{arch}.*` keys the converter writes as it makes the tensors it computes from the
    config, before any other metadata (the family's `early_hparams`)."""
    if arch.early_hparams is None:
        return {}
    if arch.config_hook is not None:
        config = arch.config_hook(config)
    written = arch.early_hparams(config, config_path)
    return {f"{arch.gguf_arch}.{key}": typed(kind, value) for key, kind, value in written}


def model_hparams(
    arch: Architecture, config: Mapping[str, Any], config_path: Path, file_type: int
) -> dict[str, GGUFValue]:
    """The `{arch}.*` hyperparameters and `general.file_type`, in llama.cpp's order."""
    name = arch.gguf_arch
    if arch.config_hook is not None:
        config = arch.config_hook(config)
    if arch.hparams_writer is not None:
        # the family's converter class writes its own keys, in its own order
        written = arch.hparams_writer(config, config_path, file_type)
        own = {key: typed(kind, value) for key, kind, value in written}
        own["general.quantization_version"] = typed("UINT32", gguf.GGML_QUANT_VERSION)
        return own
    out: dict[str, GGUFValue] = {}
    out.update(_params(name, COMMON, config, config_path))
    if config.get("is_causal") is False:
        out[f"{name}.attention.causal"] = typed("BOOL", False)
    rope = rope_parameters(config)
    out.update(_rope_scaling(name, rope, config_path))
    if (theta := rope.get("rope_theta")) is not None:
        out[f"{name}.rope.freq_base"] = typed("FLOAT32", theta)
    if (swa_theta := sliding_rope_theta(config)) is not None:
        out[f"{name}.rope.freq_base_swa"] = typed("FLOAT32", swa_theta)
    out.update(_params(name, AFTER_ROPE, config, config_path))
    out["general.file_type"] = typed("UINT32", file_type)
    for extra in arch.extra_hparams:
        out[f"{name}.{extra}"] = typed("UINT32", _extra(extra, config, config_path))
    out.update(_params(name, arch.own_hparams, config, config_path))
    if arch.hparams_hook is not None:
        # a key written before (key_length from head_dim) is overwritten in its place, as
        # gguf-py's writer does when a converter sets it twice
        for key, kind, value in arch.hparams_hook(config, config_path):
            out[f"{name}.{key}"] = typed(kind, value)
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
        source = next(key for key in param.config_keys if key in config)
        yield f"{arch}.{param.key}", _checked(param, value, f"{config_path}: {source!r}")


def _checked(param: HParam, value: Any, where: str) -> GGUFValue:
    """`value` as `param`'s GGUF type; `where` names the config file and key for errors."""
    if param.choices:
        return typed(param.kind, _choice(param, value, where))
    number = (int,) if param.kind.startswith("UINT") else (int, float)
    if isinstance(value, bool) or not isinstance(value, number) or value < 0:
        raise ConvertError(
            f"{where} (for {param.key}): expected a "
            f"non-negative {'integer' if number == (int,) else 'number'}, got {value!r}"
        )
    return typed(param.kind, value)


def _choice(param: HParam, value: Any, where: str) -> int:
    """The number llama.cpp stores for the config's string `value` of `param`."""
    choices = dict(param.choices)
    if not isinstance(value, str) or value not in choices:
        raise ConvertError(
            f"{where} (for {param.key}): expected one of {', '.join(choices)}, got {value!r}"
        )
    return choices[value]


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
        for key, sources in YARN_EXTRAS:
            if (value := first_present(rope, sources)) is not None:
                yield f"{prefix}.{key}", typed("FLOAT32", value)


def _extra(key: str, config: Mapping[str, Any], config_path: Path) -> int:
    if key == "vocab_size":
        value = config.get("vocab_size")
        if not isinstance(value, int):
            raise ConvertError(f"{config_path}: expected an integer 'vocab_size', got {value!r}")
        return value
    return head_dim(config, config_path)
