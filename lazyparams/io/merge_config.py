"""A merge configuration (mergekit's YAML) as a source: every model it names, opened as one set.

The YAML says which checkpoints a merge reads (`models`, `base_model`, `slices` of layers) and
how (`merge_method`, `parameters`, `dtype`, `out_dtype`, `tokenizer_source`). This module
checks its shape, key by key (a key it does not know is an error naming it and its line, never
ignored), resolves each model's path (relative paths from the configuration's folder, else from
the working directory) and opens the models as one `SourceSet`, its tensors named
`ALIAS::NAME`; what each method's parameters mean is the merge methods' business
(`targets.merge`). Imports the io layer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.source_set import SourceSet
from lazyparams.io.yaml_lines import YamlDocument, read_yaml

TOP_KEYS = (
    "merge_method",
    "base_model",
    "models",
    "slices",
    "parameters",
    "dtype",
    "out_dtype",
    "tokenizer_source",
)
NOT_READ = {
    "modules": "merges of several modules (separate text and vision towers)",
    "tokenizer": "a merged vocabulary (tokenizer: source: union)",
    "chat_template": "a chat template chosen here",
}
"""mergekit keys this reader refuses by name rather than as unknown: what each would ask for."""
MODEL_KEYS = ("model", "parameters", "layer_range")
SLICE_KEYS = ("sources", "parameters", "base_model")


@dataclass(frozen=True, slots=True)
class ModelRef:
    """One model the configuration reads: its alias in the source set, its folder, its own
    parameters (raw, as written) and, inside a slice, the layers it gives."""

    alias: str
    path: Path
    parameters: Mapping[str, Any]
    layer_range: tuple[int, int] | None = None
    where: str = ""
    """`FILE, line N` of its entry, for messages."""


@dataclass(frozen=True, slots=True)
class MergeSlice:
    """A `slices` entry: the layer ranges of its sources, stacked in the output."""

    sources: tuple[ModelRef, ...]
    parameters: Mapping[str, Any]
    base: str | None
    where: str


@dataclass(frozen=True, slots=True)
class MergeConfig:
    """A checked merge configuration; models are named by alias (see `SourceSet`)."""

    path: Path
    method: str
    models: tuple[ModelRef, ...]
    """The `models` entries, or, with `slices`, every slice source in order."""
    base: str | None
    parameters: Mapping[str, Any]
    slices: tuple[MergeSlice, ...] = ()
    dtype: str | None = None
    out_dtype: str | None = None
    tokenizer_source: str | None = None
    folders: Mapping[str, Path] = field(default_factory=dict)
    """Every alias's model folder (the base's too)."""
    document: YamlDocument | None = field(default=None, repr=False, compare=False)

    def where(self, *keys: str | int) -> str:
        """`FILE, line N` of the value at `keys`."""
        return str(self.path) if self.document is None else self.document.where(*keys)


def read_merge_config(path: str | os.PathLike[str]) -> MergeConfig:
    """The configuration at `path`, checked key by key (no model is opened yet)."""
    document = read_yaml(Path(path))
    for key, what in NOT_READ.items():
        if isinstance(document.value, dict) and key in document.value:
            raise CheckpointError(
                f"{document.where(key)}: {key}: {what} is not supported; expected a "
                "configuration of one model's tensors (tokenizer_source: base or a model)"
            )
    top = _mapping(document, document.value, (), TOP_KEYS, "the configuration")
    method = top.get("merge_method")
    if not isinstance(method, str) or not method:
        raise CheckpointError(f"{document.where()}: expected merge_method: NAME")
    folders = _Folders(document)
    base = (
        None if top.get("base_model") is None else folders.alias(top["base_model"], ("base_model",))
    )
    if ("models" in top) == ("slices" in top):
        raise CheckpointError(f"{document.where()}: expected either models or slices, not both")
    slices = _slices(document, top.get("slices"), folders) if "slices" in top else ()
    models = (
        tuple(m for s in slices for m in s.sources)
        if slices
        else _models(document, top["models"], ("models",), folders)
    )
    return MergeConfig(
        Path(path),
        method,
        models,
        base,
        _parameters(document, top.get("parameters"), ("parameters",)),
        slices,
        _text(document, top, "dtype"),
        _text(document, top, "out_dtype"),
        _text(document, top, "tokenizer_source"),
        dict(folders.paths),
        document,
    )


def open_merge_sources(path: str | os.PathLike[str]) -> SourceSet:
    """Every model the configuration at `path` names, opened as one `SourceSet` (aliases as
    in its `MergeConfig`, which the set keeps as `merge_config`)."""
    from lazyparams.io.detect import open_source

    config = read_merge_config(path)
    members: dict[str, Any] = {}
    try:
        for alias, folder in config.folders.items():
            members[alias] = open_source(folder)
    except BaseException:
        for member in members.values():
            member.close()
        raise
    sources = SourceSet(str(path), members)
    sources.merge_config = config  # type: ignore[attr-defined]
    return sources


class _Folders:
    """Model references resolved to folders, each folder given one alias (its name, made
    unique with a number)."""

    def __init__(self, document: YamlDocument) -> None:
        self.document = document
        self.paths: dict[str, Path] = {}
        self._by_folder: dict[Path, str] = {}

    def alias(self, reference: Any, at: tuple[str | int, ...]) -> str:
        folder = self._resolve(reference, at)
        if folder not in self._by_folder:
            named = folder.parent.parent if folder.parent.name == "snapshots" else folder
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", named.name.split("--")[-1]) or "model"
            alias, count = stem, 1
            while alias in self.paths:
                count += 1
                alias = f"{stem}-{count}"
            self._by_folder[folder] = alias
            self.paths[alias] = folder
        return self._by_folder[folder]

    def _resolve(self, reference: Any, at: tuple[str | int, ...]) -> Path:
        where = self.document.where(*at)
        if not isinstance(reference, str) or not reference:
            raise CheckpointError(f"{where}: expected a model folder path, got {reference!r}")
        if "+" in reference:
            raise CheckpointError(
                f"{where}: model {reference!r}: a model+adapter reference is not read here; "
                "expected a model folder (merge the adapter first with `lazyparams merge-lora`)"
            )
        here = self.document.path.parent / reference
        candidate = here if here.exists() else Path(reference)
        if not candidate.exists():
            candidate = hub_snapshot(reference) or candidate
        if not candidate.exists():
            raise CheckpointError(
                f"{where}: model {reference!r}: no such folder (looked in {here.parent}, the "
                "working directory and the Hugging Face cache); expected a local model folder "
                "or a downloaded ORG/NAME"
            )
        return candidate.absolute()


def hub_snapshot(reference: str) -> Path | None:
    """The downloaded snapshot of Hugging Face model `ORG/NAME` (or `ORG/NAME@REVISION`) in
    the local cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub): the
    revision `refs/main` names, else the only snapshot; None when it is not there."""
    name, _, revision = reference.partition("@")
    if name.count("/") != 1 or name.startswith(("/", ".")):
        return None
    entry = _hub_cache() / ("models--" + name.replace("/", "--"))
    ref = entry / "refs" / (revision or "main")
    if ref.is_file():
        revision = ref.read_text().strip()
    snapshots = entry / "snapshots"
    if revision:
        found = snapshots / revision
        return found if found.is_dir() else None
    listed = sorted(snapshots.iterdir()) if snapshots.is_dir() else []
    return listed[0] if len(listed) == 1 else None


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def _mapping(
    document: YamlDocument, value: Any, at: tuple[str | int, ...], keys: tuple[str, ...], what: str
) -> dict[str, Any]:
    """`value` as a mapping whose every key is one of `keys`."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{document.where(*at)}: expected {what} as a mapping of keys")
    for key in value:
        if key not in keys:
            raise CheckpointError(
                f"{document.where(*at, key)}: unknown key {key!r} in {what}; expected one of "
                f"{', '.join(keys)}"
            )
    return value


def _list(document: YamlDocument, value: Any, at: tuple[str | int, ...]) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise CheckpointError(f"{document.where(*at)}: expected a non-empty list")
    return value


def _models(
    document: YamlDocument, value: Any, at: tuple[str | int, ...], folders: _Folders
) -> tuple[ModelRef, ...]:
    refs = []
    for index, entry in enumerate(_list(document, value, at)):
        here = (*at, index)
        if isinstance(entry, str):
            entry = {"model": entry}
        item = _mapping(document, entry, here, MODEL_KEYS, "a model entry")
        if "model" not in item:
            raise CheckpointError(f"{document.where(*here)}: expected model: PATH")
        alias = folders.alias(item["model"], (*here, "model"))
        refs.append(
            ModelRef(
                alias,
                folders.paths[alias],
                _parameters(document, item.get("parameters"), (*here, "parameters")),
                _layer_range(document, item.get("layer_range"), (*here, "layer_range")),
                document.where(*here),
            )
        )
    return tuple(refs)


def _slices(document: YamlDocument, value: Any, folders: _Folders) -> tuple[MergeSlice, ...]:
    result = []
    for index, entry in enumerate(_list(document, value, ("slices",))):
        at = ("slices", index)
        item = _mapping(document, entry, at, SLICE_KEYS, "a slice")
        sources = _models(document, item.get("sources"), (*at, "sources"), folders)
        for source in sources:
            if source.layer_range is None:
                raise CheckpointError(f"{source.where}: expected layer_range: [START, END]")
        base = item.get("base_model")
        result.append(
            MergeSlice(
                sources,
                _parameters(document, item.get("parameters"), (*at, "parameters")),
                None if base is None else folders.alias(base, (*at, "base_model")),
                document.where(*at),
            )
        )
    return tuple(result)


def _parameters(document: YamlDocument, value: Any, at: tuple[str | int, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CheckpointError(f"{document.where(*at)}: expected parameters as NAME: VALUE")
    return dict(value)


def _layer_range(
    document: YamlDocument, value: Any, at: tuple[str | int, ...]
) -> tuple[int, int] | None:
    if value is None:
        return None
    ok = isinstance(value, list) and len(value) == 2
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if not ok or not 0 <= value[0] < value[1]:
        raise CheckpointError(
            f"{document.where(*at)}: layer_range {value!r}: expected [START, END] with "
            "0 <= START < END"
        )
    return value[0], value[1]


def _text(document: YamlDocument, top: Mapping[str, Any], key: str) -> str | None:
    value = top.get(key)
    if value is not None and not isinstance(value, str):
        raise CheckpointError(f"{document.where(key)}: {key}: expected text, got {value!r}")
    return value
