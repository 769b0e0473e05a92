"""The registry of output formats: one module per format in this package, each declaring `FORMAT`.

An `OutputFormat` says what a format is called, which destination suffixes name it, what it can
store (a check of the outputs' names and dtypes, and the kind of metadata it keeps), how its
tensors are laid out in files, which staged writer writes it and how a resume checks it. The
engine, the CLI and the cluster look formats up here; a new format is a new module. Imports the
io layer's light modules; a format's module imports its libraries only when laying out.
"""

from __future__ import annotations

import enum
import importlib
import os
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import CheckpointError

if TYPE_CHECKING:
    from lazyparams.io.base import CheckpointSink, TensorInfo
    from lazyparams.io.output_layout import Layout

DEFAULT = "safetensors"
"""The format of a destination whose suffix names none."""


class Metadata(enum.Enum):
    """What a format keeps besides tensors."""

    NONE = "none"
    STRINGS = "a map of text keys to text values"
    GGUF = "GGUF key-values and a tokenizer"


class Writer(enum.Enum):
    """The engine's staged writer of a format, and how a resume checks what it reuses."""

    SHARDS = "shards written by offset; a resume reuses the journaled tensors"
    """Shard files written in place (also by the parts of a cluster run), journaled by name."""
    SLOTS = "slots of a layout; a resume re-reads each journaled tensor's CRC"
    """A `Layout`'s files; every tensor journaled with its CRC and checked again on resume
    (every byte in a zip, whose members carry a CRC; else sampled blocks)."""


@dataclass(frozen=True, slots=True)
class LayoutOptions:
    """What laying out may depend on besides the outputs: the shard size, the checked metadata
    (a `GGUFMetadata` for GGUF, text pairs for safetensors, None) and a scratch folder."""

    shard_size: int | None = None
    metadata: Any = None
    scratch: Path | None = None


Check = Callable[[str, "Sequence[TensorInfo]"], None]
LayOut = Callable[[Path, "Sequence[TensorInfo]", LayoutOptions], "Layout"]
Files = Callable[[Path, "Sequence[TensorInfo]", LayoutOptions], list[Path]]


def one_file(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> list[Path]:
    """The published files of a format written as DST itself (a file, or a folder)."""
    return [dst]


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """One output format (see the module docstring): a module's `FORMAT`."""

    name: str
    """What `--format` and `format=` accept."""
    writes: str
    """What a destination of this format is, for help and messages ("one .npz archive")."""
    suffixes: tuple[str, ...]
    """The destination suffixes that name the format (lower case; one format each)."""
    check: Check
    """Refuses, before any data, an output the format cannot store (its name or dtype)."""
    metadata: Metadata = Metadata.NONE
    """What the format keeps besides tensors."""
    writer: Writer = Writer.SLOTS
    lay_out: LayOut | None = None
    """Where each tensor goes (for `Writer.SLOTS`)."""
    files: Files = one_file
    """The paths a finished output publishes."""
    shardable: bool = False
    sink: Callable[..., CheckpointSink] | None = None
    """The io layer's atomic sink of the format (`open_sink`), where it has one."""
    check_path: Callable[[Path, Sequence[TensorInfo]], None] | None = None
    """Refuses a destination path that cannot hold these outputs (a `.npy` file, one)."""

    @property
    def suffix(self) -> str:
        """The suffix a destination of this format is expected to end in ('' for a folder)."""
        return self.suffixes[0] if self.suffixes else ""


def io_sink(module: str, name: str, **renamed: str) -> Callable[..., CheckpointSink]:
    """The sink class `name` of io module `module`, imported on first call (`renamed` maps
    `open_sink`'s option names to the class's)."""

    def make(path: Any, infos: Sequence[TensorInfo], **options: Any) -> CheckpointSink:
        found = getattr(importlib.import_module(f"lazyparams.io.{module}"), name)
        sink: CheckpointSink = found(
            path, infos, **{renamed.get(k, k): v for k, v in options.items()}
        )
        return sink

    return make


@cache
def _registry() -> dict[str, OutputFormat]:
    """Every format module of this package, found by listing it: adding one is enough."""
    found: dict[str, OutputFormat] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        declared = getattr(importlib.import_module(f"{__name__}.{module}"), "FORMAT", None)
        if isinstance(declared, OutputFormat):
            found[declared.name] = declared
    return found


def output_formats() -> tuple[OutputFormat, ...]:
    """Every registered format, the default first, then by name."""
    formats = _registry()
    return (formats[DEFAULT], *(f for n, f in sorted(formats.items()) if n != DEFAULT))


def format_names() -> tuple[str, ...]:
    """The names `--format` and `format=` accept."""
    return tuple(f.name for f in output_formats())


def output_format(name: str) -> OutputFormat:
    """The format called `name`; CheckpointError listing the others if there is none."""
    found = _registry().get(name)
    if found is None:
        raise CheckpointError(f"format: expected one of {', '.join(format_names())}, got {name!r}")
    return found


def format_of_suffix(path: str | os.PathLike[str]) -> OutputFormat | None:
    """The format DST's suffix names, or None (a folder, or a suffix no format claims)."""
    suffix = Path(path).suffix.lower()
    return next((f for f in output_formats() if suffix and suffix in f.suffixes), None)


def with_metadata(kind: Metadata) -> tuple[str, ...]:
    """The formats that keep metadata of `kind` (for messages)."""
    return tuple(f.name for f in output_formats() if f.metadata is kind)


def open_sink(
    path: str | os.PathLike[str],
    infos: Sequence[TensorInfo],
    format: str | None = None,
    shard_size: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> CheckpointSink:
    """An io-layer sink for `infos` at `path`, in `format` or the one the suffix names.

    `shard_size` (bytes per shard or part) is for the formats that shard; `metadata`
    (key/value pairs, see `GGUFSink`) for those that keep GGUF key-values.
    """
    chosen = output_format(format) if format else format_of_suffix(path)
    if chosen is None and shard_size is not None:
        chosen = output_format(DEFAULT)
    with_sinks = ", ".join(f.name for f in output_formats() if f.sink is not None)
    if chosen is None:
        raise CheckpointError(
            f"{path}: cannot tell the output format from the name; pass format= one of {with_sinks}"
        )
    if chosen.sink is None:
        raise CheckpointError(
            f"{path}: {chosen.name} output has no sink to write through here; convert() writes "
            f"it, and open_sink takes one of {with_sinks}"
        )
    if shard_size is not None and not chosen.shardable:
        shardable = " and ".join(f.name for f in output_formats() if f.shardable)
        raise CheckpointError(
            f"{path}: sharding is only supported for {shardable}, not {chosen.name}"
        )
    options: dict[str, Any] = {} if shard_size is None else {"shard_size": shard_size}
    if metadata is not None:
        if chosen.metadata is not Metadata.GGUF:
            raise CheckpointError(f"{path}: metadata is only written to gguf, not {chosen.name}")
        options["metadata"] = metadata
    return chosen.sink(path, infos, **options)


def __getattr__(name: str) -> Any:
    """`SINK_FORMATS`: the names of the formats `open_sink` writes, from the registry."""
    if name == "SINK_FORMATS":
        return tuple(f.name for f in output_formats() if f.sink is not None)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
