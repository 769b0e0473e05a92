"""Choosing a source or sink for a path: `open_source` detects the format, `open_sink` picks one.

Detection goes by extension, then by folder contents, then by the file's first bytes. Imports the
io layer only, each format's module when a path of that format is opened.
"""

from __future__ import annotations

import importlib
import os
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.base import CheckpointSink, CheckpointSource, TensorInfo, open_binary

Opener = Callable[[Path], CheckpointSource]


def _opener(module: str, name: str) -> Opener:
    """The opener `name` of io module `module`, imported on first call: a command loads only
    the formats it opens (gguf's and torch's libraries cost more than the rest of a plan)."""

    def open_path(path: Path) -> CheckpointSource:
        found: Opener = getattr(importlib.import_module(f"lazyparams.io.{module}"), name)
        return found(path)

    return open_path


_safetensors = _opener("safetensors_source", "SafetensorsSource")
_torch = _opener("torch_source", "TorchSource")
_npz = _opener("numpy_source", "NpzSource")
_npy_folder = _opener("numpy_source", "NpyFolderSource")
_gguf = _opener("gguf_split_source", "open_gguf")
_BY_SUFFIX: dict[str, Opener] = {
    ".safetensors": _safetensors,
    ".gguf": _gguf,
    ".bin": _torch,
    ".pt": _torch,
    ".pth": _torch,
    ".npz": _npz,
}
SINK_FORMATS = ("safetensors", "npz", "npy", "gguf")
_SINK_SUFFIXES = {".safetensors": "safetensors", ".npz": "npz", ".gguf": "gguf"}


def open_source(path: str | os.PathLike[str]) -> CheckpointSource:
    """Open a checkpoint file or folder, detecting its format.

    A folder is read through its `*.index.json` if it has one (safetensors first), else its single
    .safetensors / .gguf / .bin / .pt / .pth / .npz file (or the parts of one split GGUF), else
    its .npy files. A part of a split GGUF opens the whole set.
    """
    target = Path(path)
    if target.is_dir():
        return _open_folder(target)
    if not target.exists():
        raise CheckpointError(f"{target}: no such file or folder")
    if target.name.endswith(".index.json"):
        return _sharded(target)
    return (_BY_SUFFIX.get(target.suffix) or _sniff(target))(target)


def _open_folder(folder: Path) -> CheckpointSource:
    indexes = sorted(folder.glob("*.index.json"), key=lambda p: (".safetensors." not in p.name, p))
    if indexes:
        return _sharded(indexes[0])
    for suffix, opener in _BY_SUFFIX.items():
        files = sorted(folder.glob(f"*{suffix}"))
        if len(files) > 1 and suffix == ".gguf":
            from lazyparams.io.gguf_split_source import open_gguf_folder

            return open_gguf_folder(folder, files)
        if len(files) > 1:
            names = ", ".join(f.name for f in files[:4])
            raise CheckpointError(f"{folder}: several {suffix} files ({names}) and no index")
        if files:
            return opener(files[0])
    if any(folder.rglob("*.npy")):
        return _npy_folder(folder)
    raise CheckpointError(f"{folder}: no checkpoint found (no index, weights file or .npy files)")


def _sharded(index: Path) -> CheckpointSource:
    from lazyparams.io.sharded_source import ShardedSource

    return ShardedSource(index, open_source)


def _sniff(path: Path) -> Opener:
    """Guess a file's format from its first bytes when its extension says nothing."""
    with open_binary(str(path)) as fp:
        head = fp.read(9)
    if head.startswith(b"GGUF"):
        return _gguf
    if head.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(path) as archive:
            is_torch = any(n.rsplit("/", 1)[-1] == "data.pkl" for n in archive.namelist())
        return _torch if is_torch else _npz
    if len(head) == 9 and head[8:9] == b"{":
        return _safetensors
    raise CheckpointError(
        f"{path}: cannot tell the checkpoint format (expected .safetensors, .gguf, .bin, .pt, "
        ".pth, .npz, an index .json or a folder)"
    )


def open_sink(
    path: str | os.PathLike[str],
    infos: Sequence[TensorInfo],
    format: str | None = None,
    shard_size: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> CheckpointSink:
    """A sink for `infos` at `path`, in `format` or the one the extension names.

    `format` is one of SINK_FORMATS; `shard_size` (bytes per shard or part) is for safetensors
    and GGUF; `metadata` (key/value pairs, see `GGUFSink`) for GGUF only.
    """
    chosen = format or _SINK_SUFFIXES.get(Path(path).suffix)
    if chosen is None and shard_size is not None:
        chosen = "safetensors"
    if chosen is None:
        raise CheckpointError(
            f"{path}: cannot tell the output format from the name; pass format= one of "
            f"{', '.join(SINK_FORMATS)}"
        )
    if shard_size is not None and chosen not in ("safetensors", "gguf"):
        raise CheckpointError(
            f"{path}: sharding is only supported for safetensors and gguf, not {chosen}"
        )
    if metadata is not None and chosen != "gguf":
        raise CheckpointError(f"{path}: metadata is only written to gguf, not {chosen}")
    from lazyparams.io.gguf_format import GGUFSink
    from lazyparams.io.numpy_sink import NpyFolderSink, NpzSink
    from lazyparams.io.safetensors_sink import SafetensorsSink

    if chosen == "safetensors":
        return SafetensorsSink(path, infos, max_shard_size=shard_size)
    if chosen == "npz":
        return NpzSink(path, infos)
    if chosen == "npy":
        return NpyFolderSink(path, infos)
    if chosen == "gguf":
        return GGUFSink(path, infos, metadata=metadata, shard_size=shard_size)
    raise CheckpointError(f"{path}: unknown format {chosen!r}; expected one of {SINK_FORMATS}")
