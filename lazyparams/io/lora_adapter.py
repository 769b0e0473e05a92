"""PEFT LoRA adapters as a source: a base model and its adapters, opened as one `SourceSet`.

An adapter is a folder holding `adapter_config.json` and `adapter_model.safetensors` (or
`adapter_model.bin`, read without torch). This module reads and checks the configuration, key
by key: what changes a merge (r, lora_alpha, use_rslora, use_dora, fan_in_fan_out,
target_modules, modules_to_save, rank_pattern, alpha_pattern) is parsed; bookkeeping keys are
ignored; any other feature that is switched on (another peft_type, lora_bias, trainable
tokens, ...) is one error naming the file. What the tensors mean is `targets.lora`'s business.
Imports the io layer.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.model_config import read_config
from lazyparams.io.source_set import SourceSet

CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
"""The adapter's tensors, in the order PEFT looks for them."""
BASE_ALIAS, FINETUNED_ALIAS = "base", "finetuned"
"""The aliases of the base model and of a fine-tuned model (for an extraction) in a set."""
PREFIX = "base_model.model."
"""What PEFT puts before a module's name in an adapter's tensor names."""

IGNORED_KEYS = frozenset(
    {
        "base_model_name_or_path",
        "revision",
        "task_type",
        "inference_mode",
        "lora_dropout",
        "init_lora_weights",
        "layers_to_transform",
        "layers_pattern",
        "peft_version",
        "auto_mapping",
        "megatron_config",
        "megatron_core",
        "loftq_config",
        "eva_config",
        "corda_config",
        "lora_ga_config",
        "qalora_group_size",
        "ensure_weight_tying",
    }
)
"""Keys that say how an adapter was made or trained, not what its merge is: which layers it
adapts shows in its tensors (`layers_to_transform`), dropout and initialisation do not
matter once trained."""


@dataclass(frozen=True, slots=True)
class AdapterConfig:
    """A checked `adapter_config.json` (see the module docstring); `path` names it."""

    path: Path
    r: int
    lora_alpha: float
    target_modules: tuple[str, ...] | str | None = None
    exclude_modules: tuple[str, ...] | str | None = None
    use_rslora: bool = False
    use_dora: bool = False
    fan_in_fan_out: bool = False
    modules_to_save: tuple[str, ...] = ()
    rank_pattern: Mapping[str, int] = field(default_factory=dict)
    alpha_pattern: Mapping[str, float] = field(default_factory=dict)

    def rank_of(self, module: str) -> int:
        """The rank of `module`: its `rank_pattern` entry (the first key matching the end of
        its name, as PEFT matches), else r."""
        key = _pattern_key(self.rank_pattern, module)
        return self.r if key is None else self.rank_pattern[key]

    def alpha_of(self, module: str) -> float:
        """lora_alpha of `module`, by `alpha_pattern` as `rank_of`."""
        key = _pattern_key(self.alpha_pattern, module)
        return self.lora_alpha if key is None else self.alpha_pattern[key]

    def scaling(self, module: str, weight: float = 1.0) -> float:
        """`weight * alpha / r` of `module` (`sqrt(r)` with use_rslora), in PEFT's order of
        operations (its `set_scale`), so that the float32 factor is PEFT's to the bit."""
        rank = self.rank_of(module)
        divisor = math.sqrt(rank) if self.use_rslora else rank
        return weight * self.alpha_of(module) / divisor

    def targets(self, module: str) -> bool:
        """Whether `target_modules` (less `exclude_modules`) names `module`, as PEFT decides."""
        if _names(self.exclude_modules, module):
            return False
        return _names(self.target_modules, module)

    def saves(self, module: str) -> bool:
        """Whether `module` is one of `modules_to_save` (or inside one)."""
        return any(re.match(rf"(^|.*\.){m}($|\..*)", module) for m in self.modules_to_save)


@dataclass(frozen=True, slots=True)
class LoraAdapter:
    """One adapter of a merge: its alias in the source set, folder, configuration, weight."""

    alias: str
    folder: Path
    config: AdapterConfig
    weight: float = 1.0


def read_adapter_config(folder: str | os.PathLike[str]) -> AdapterConfig:
    """The checked configuration in `folder` (see the module docstring)."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: not found; expected a PEFT adapter folder")
    raw = read_config(path)
    peft_type = raw.get("peft_type", "LORA")
    if peft_type != "LORA":
        raise CheckpointError(f"{path}: peft_type {peft_type!r} is not supported; expected LORA")
    reader = _Keys(path, raw)
    config = AdapterConfig(
        path,
        reader.positive_int("r"),
        reader.number("lora_alpha"),
        reader.modules("target_modules"),
        reader.modules("exclude_modules"),
        reader.flag("use_rslora"),
        reader.flag("use_dora"),
        reader.flag("fan_in_fan_out"),
        tuple(reader.names("modules_to_save")),
        reader.pattern("rank_pattern", integer=True),
        reader.pattern("alpha_pattern", integer=False),
    )
    reader.refuse_the_rest()
    return config


def adapter_weights_file(folder: Path) -> Path:
    """The adapter's tensors file: adapter_model.safetensors, else adapter_model.bin."""
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise CheckpointError(f"{folder}: no {' or '.join(WEIGHT_FILES)}; expected a PEFT adapter")


def open_lora_sources(
    base: str | os.PathLike[str],
    adapters: Sequence[str | os.PathLike[str]],
    weights: Sequence[float] | None = None,
) -> SourceSet:
    """The base model (alias `base`) and every adapter (`lora1`, `lora2`, ...) as one
    `SourceSet`, which keeps the adapters (`LoraAdapter`) as `lora_adapters`; every
    configuration is checked before any tensor file is opened."""
    found = _adapters(adapters, _checked_weights(adapters, weights))
    paths = {BASE_ALIAS: base, **{a.alias: adapter_weights_file(a.folder) for a in found}}
    sources = SourceSet(str(found[0].config.path), _open_all(paths))
    sources.lora_adapters = found  # type: ignore[attr-defined]
    sources.lora_base = Path(base)  # type: ignore[attr-defined]
    return sources


def open_extraction_sources(
    base: str | os.PathLike[str], finetuned: str | os.PathLike[str]
) -> SourceSet:
    """The base model and a fine-tuned model of it as one `SourceSet` (aliases `base` and
    `finetuned`), for extracting the adapter that leads from one to the other."""
    members = _open_all({BASE_ALIAS: base, FINETUNED_ALIAS: finetuned})
    return SourceSet(str(finetuned), members)


def _open_all(paths: Mapping[str, str | os.PathLike[str]]) -> dict[str, Any]:
    """Every path opened as a source, by alias; none left open when one fails."""
    from lazyparams.io.detect import open_source

    members: dict[str, Any] = {}
    try:
        for alias, path in paths.items():
            members[alias] = open_source(path)
    except BaseException:
        for member in members.values():
            member.close()
        raise
    return members


def _checked_weights(
    adapters: Sequence[str | os.PathLike[str]], weights: Sequence[float] | None
) -> list[float]:
    if not adapters:
        raise CheckpointError("expected at least one LoRA adapter folder")
    if weights is None:
        return [1.0] * len(adapters)
    if len(weights) != len(adapters):
        raise CheckpointError(
            f"weights: {len(weights)} given for {len(adapters)} adapters; expected one weight "
            "per adapter"
        )
    for weight in weights:
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise CheckpointError(f"weights: {weight!r}: expected a number")
        if not math.isfinite(weight):
            raise CheckpointError(f"weights: {weight!r}: expected a finite number")
    return [float(w) for w in weights]


def _adapters(
    folders: Sequence[str | os.PathLike[str]], weights: Sequence[float]
) -> tuple[LoraAdapter, ...]:
    found = []
    for index, (given, weight) in enumerate(zip(folders, weights, strict=True), start=1):
        folder = Path(given)
        if folder.is_file():  # the adapter's weights file named instead of its folder
            folder = folder.parent
        if not folder.is_dir():
            raise CheckpointError(f"{given}: no such folder; expected a PEFT adapter folder")
        config = read_adapter_config(folder)
        found.append(LoraAdapter(f"lora{index}", folder.absolute(), config, weight))
    return tuple(found)


def _pattern_key(pattern: Mapping[str, Any], module: str) -> str | None:
    """The first key of `pattern` (a regular expression) that matches the end of `module`
    after a dot, as PEFT's `get_pattern_key`."""
    for key in pattern:
        if re.match(rf"(.*\.)?({key})$", module):
            return key
    return None


def _names(modules: tuple[str, ...] | str | None, module: str) -> bool:
    """Whether `modules` (a regular expression matching the whole name, or names matching its
    end after a dot) names `module`."""
    if modules is None:
        return False
    if isinstance(modules, str):
        return re.fullmatch(modules, module) is not None
    return module in modules or any(module.endswith(f".{m}") for m in modules)


class _Keys:
    """The keys of a configuration, read one by one; `refuse_the_rest` checks the others."""

    def __init__(self, path: Path, raw: Mapping[str, Any]) -> None:
        self.path = path
        self.raw = raw
        self.read = {"peft_type", *IGNORED_KEYS}

    def _get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        value = self.raw.get(key)
        return default if value is None else value

    def _refuse(self, key: str, expected: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {key} {self.raw[key]!r}: expected {expected}")

    def positive_int(self, key: str) -> int:
        value = self._get(key)
        if value is None and key not in self.raw:
            raise CheckpointError(f"{self.path}: no {key}; expected {key}: a positive integer")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._refuse(key, "a positive integer")
        return value

    def number(self, key: str) -> float:
        value = self._get(key)
        if value is None and key not in self.raw:
            raise CheckpointError(f"{self.path}: no {key}; expected {key}: a number")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._refuse(key, "a number")
        return value

    def flag(self, key: str) -> bool:
        value = self._get(key, False)
        if not isinstance(value, bool):
            raise self._refuse(key, "true or false")
        return value

    def names(self, key: str) -> list[str]:
        value = self._get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._refuse(key, "a list of module names")
        return value

    def modules(self, key: str) -> tuple[str, ...] | str | None:
        value = self._get(key)
        if value is None or isinstance(value, str):
            return value
        return tuple(self.names(key))

    def pattern(self, key: str, integer: bool) -> dict[str, Any]:
        value = self._get(key, {})
        wanted = "a positive integer" if integer else "a number"
        if not isinstance(value, dict):
            raise self._refuse(key, f"a mapping of module patterns to {wanted}")
        for entry in value.values():
            bad = isinstance(entry, bool) or not isinstance(entry, int if integer else int | float)
            if bad or (integer and entry < 1):
                raise self._refuse(key, f"a mapping of module patterns to {wanted}")
        return dict(value)

    def refuse_the_rest(self) -> None:
        """Refuse a key not read that switches a feature on (anything but null, false or an
        empty value): a merge that ignored it would be wrong."""
        for key, value in self.raw.items():
            if key in self.read or value in (None, False, "", [], {}):
                continue
            bias = key == "bias" and value == "none"
            if not bias:
                raise CheckpointError(
                    f"{self.path}: {key} = {value!r} is not supported by lazyparams' LoRA merge; "
                    "expected it unset (null or false)"
                )
