"""The registry of checkpoint formats a source can read: one `SourceFormat` entry per format.

An entry names the io module that reads the format and the callables in it, so that nothing is
imported until a path of that format is opened; `open_source`, the files a conversion
fingerprints and the messages that list the formats all read this table. Imports only the
standard library, the error types and io.reasons.
"""

from __future__ import annotations

import importlib
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.reasons import zip_directory_reason

Sniff = Callable[[bytes, Path], bool]
"""Whether a file is of a format, from its first `SNIFF_BYTES` bytes (and its path)."""
SNIFF_BYTES = 9


@dataclass(frozen=True, slots=True)
class SourceFormat:
    """How one checkpoint format is found and opened.

    `reads` says in one line what the format's reader accepts. `module` (a dotted module name)
    is imported only when a path of the format is opened; `opener` in it opens one file,
    `opener(path) -> CheckpointSource`. A folder holding one file with one of `suffixes` opens
    that file; `several`, when given, opens a folder holding more (`several(folder, files)`:
    the parts of a split GGUF). `tree` is for a format that is a folder rather than a file:
    the folder opens as `tree(folder, allow_outside_links=...)` when a file with one of
    `suffixes` lies anywhere under it. `sniff` recognises a file whose extension says nothing.
    `in_folders` is False for a format that is read only when named (a merge configuration:
    a model folder may hold YAML files of its own).
    """

    name: str
    reads: str
    module: str
    suffixes: tuple[str, ...]
    opener: str | None = None
    several: str | None = None
    tree: str | None = None
    sniff: Sniff | None = None
    in_folders: bool = True

    def load(self, attribute: str) -> Callable[..., Any]:
        """The callable `attribute` of the format's module, imported now."""
        found: Callable[..., Any] = getattr(importlib.import_module(self.module), attribute)
        return found


SOURCE_FORMATS: dict[str, SourceFormat] = {}
"""Every registered format by name, in the order a folder is searched for them."""


def register_source_format(entry: SourceFormat) -> SourceFormat:
    """Add `entry` to the registry; a name or a file suffix already taken is refused."""
    if entry.name in SOURCE_FORMATS:
        raise CheckpointError(f"source format {entry.name!r} is registered twice")
    taken = {suffix: f.name for f in SOURCE_FORMATS.values() for suffix in f.suffixes}
    clash = next((s for s in entry.suffixes if s in taken), None)
    if clash is not None:
        raise CheckpointError(
            f"source format {entry.name!r}: suffix {clash!r} already belongs to {taken[clash]!r}"
        )
    SOURCE_FORMATS[entry.name] = entry
    return entry


def format_of_suffix(suffix: str) -> SourceFormat | None:
    """The format whose single files end in `suffix` (`.safetensors`), else None."""
    for entry in SOURCE_FORMATS.values():
        if suffix in entry.suffixes and entry.opener is not None:
            return entry
    return None


def sniff_format(head: bytes, path: Path) -> SourceFormat | None:
    """The first format whose `sniff` recognises a file starting with `head`, else None."""
    for entry in SOURCE_FORMATS.values():
        if entry.sniff is not None and entry.opener is not None and entry.sniff(head, path):
            return entry
    return None


def file_suffixes() -> list[str]:
    """Every suffix a single checkpoint file may have, in registry order."""
    return [s for f in SOURCE_FORMATS.values() if f.opener is not None for s in f.suffixes]


def format_list() -> str:
    """The formats as messages list them: `safetensors (.safetensors), ..., npy (folder of
    .npy)`."""
    return ", ".join(f"{entry.name} ({_files_of(entry)})" for entry in SOURCE_FORMATS.values())


def _files_of(entry: SourceFormat) -> str:
    return ("folder of " if entry.tree else "") + " ".join(entry.suffixes)


def source_files(source: Any) -> list[Path]:
    """The files a source reads, each once, so that an edited source is noticed: a folder's
    files (not hidden ones), or the source's file and the shards or parts it names."""
    members = getattr(source, "members", None)
    if isinstance(members, dict):  # a source set: its own file, then every member's files
        own = source_files(_PathOnly(source.path))
        return list(dict.fromkeys([*own, *(f for m in members.values() for f in source_files(m))]))
    raw = getattr(source, "path", None)
    if not isinstance(raw, str) or not os.path.exists(raw):
        return []
    path = Path(raw).absolute()
    if path.is_dir():
        return [p for p in sorted(path.iterdir()) if p.is_file() and not p.name.startswith(".")]
    shards = sorted(set(getattr(source, "weight_map", {}).values()))
    files = dict.fromkeys([path, *(path.parent / name for name in shards)])
    return [p for p in files if p.exists()]


@dataclass(frozen=True, slots=True)
class _PathOnly:
    """A source's path alone, for the files of a source set's own file."""

    path: str


# Sniffing ------------------------------------------------------------------------------------


def _gguf_magic(head: bytes, path: Path) -> bool:
    return head.startswith(b"GGUF")


def _safetensors_header(head: bytes, path: Path) -> bool:
    """An 8-byte header length, then the header's opening brace."""
    return len(head) == SNIFF_BYTES and head[8:9] == b"{"


def _torch_zip(head: bytes, path: Path) -> bool:
    return head.startswith(b"PK\x03\x04") and _holds_data_pkl(path)


def _npz_zip(head: bytes, path: Path) -> bool:
    return head.startswith(b"PK\x03\x04") and not _holds_data_pkl(path)


def _holds_data_pkl(path: Path) -> bool:
    """Whether the zip archive at `path` holds a torch `data.pkl` (else it is taken as npz)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.rsplit("/", 1)[-1] == "data.pkl" for n in archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as err:
        reason = zip_directory_reason(err)
        raise CheckpointError(f"{path}: not a readable zip archive: {reason}") from None


# The formats, in the order a folder is searched ---------------------------------------------

_BUILT_IN: Sequence[SourceFormat] = (
    SourceFormat(
        "safetensors",
        "one .safetensors file, or the shards a model.safetensors.index.json names",
        "lazyparams.io.safetensors_source",
        (".safetensors",),
        opener="SafetensorsSource",
        sniff=_safetensors_header,
    ),
    SourceFormat(
        "gguf",
        "a GGUF file, or every part of a split set NAME-0000K-of-0000N.gguf",
        "lazyparams.io.gguf_split_source",
        (".gguf",),
        opener="open_gguf",
        several="open_gguf_folder",
        sniff=_gguf_magic,
    ),
    SourceFormat(
        "torch",
        "a zip-format torch.save state dict (torch 1.6 on), read without torch or pickled code",
        "lazyparams.io.torch_source",
        (".bin", ".pt", ".pth"),
        opener="TorchSource",
        sniff=_torch_zip,
    ),
    SourceFormat(
        "npz",
        "a numpy .npz archive, stored or deflated, never unpickled",
        "lazyparams.io.numpy_source",
        (".npz",),
        opener="NpzSource",
        sniff=_npz_zip,
    ),
    SourceFormat(
        "npy",
        "every .npy file under a folder, named by its relative path",
        "lazyparams.io.numpy_source",
        (".npy",),
        tree="NpyFolderSource",
    ),
    SourceFormat(
        "merge",
        "a merge configuration (mergekit's YAML): every model it names, read as one set",
        "lazyparams.io.merge_config",
        (".yml", ".yaml"),
        opener="open_merge_sources",
        in_folders=False,
    ),
)
for _entry in _BUILT_IN:
    register_source_format(_entry)
