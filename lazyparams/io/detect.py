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
from lazyparams.io.limits import inside_folder
from lazyparams.io.reasons import os_reason, zip_directory_reason

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


def open_source(
    path: str | os.PathLike[str], allow_outside_links: bool = False
) -> CheckpointSource:
    """Open a checkpoint file or folder, detecting its format.

    A folder is read through its `*.index.json` if it has one (safetensors first), else its single
    .safetensors / .gguf / .bin / .pt / .pth / .npz file (or the parts of one split GGUF), else
    its .npy files. A part of a split GGUF opens the whole set. The files a folder or an index
    leads to must resolve inside that folder, symlinks included, unless `allow_outside_links`.
    """
    target = Path(path)
    if _is_dir(target):
        return _open_folder(target, allow_outside_links)
    if not target.exists():
        raise CheckpointError(f"{target}: no such file or folder")
    if target.name.endswith(".index.json"):
        return open_index(target, allow_outside_links)
    return _open_file(target)


def open_index(index: Path, allow_outside_links: bool = False) -> CheckpointSource:
    """The sharded checkpoint `index` ties together, each shard opened by `shard_opener`."""
    from lazyparams.io.sharded_source import ShardedSource

    return ShardedSource(index, shard_opener(index), allow_outside_links=allow_outside_links)


def shard_opener(index: Path) -> Opener:
    """How the shards of `index` open: as files of the kind its name says
    (`model.safetensors.index.json`: safetensors), never as an index or a folder, so an index
    naming itself or another index is refused instead of recursing."""
    kind = Path(index.name.removesuffix(".index.json")).suffix

    def open_shard(shard: Path) -> CheckpointSource:
        if kind in _BY_SUFFIX and shard.suffix != kind:
            raise CheckpointError(
                f"{index}: shard {shard.name!r} is not a {kind} file; expected the {kind} "
                "shards the index's name promises"
            )
        return _open_file(shard)

    return open_shard


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{str(path)!r}: not a usable path: {_path_reason(err)}") from None


def _path_reason(err: OSError | ValueError) -> str:
    if isinstance(err, OSError):
        return os_reason(err)
    return "it cannot be passed to the OS (a NUL character, or a character it cannot encode)"


def _open_file(target: Path) -> CheckpointSource:
    """One checkpoint file, by its extension or else its first bytes (never an index)."""
    if target.name.endswith(".index.json"):
        raise CheckpointError(f"{target}: is an index, not a weights file")
    if not target.is_file():  # a FIFO or a device would block or never end
        raise CheckpointError(f"{target}: not a regular file; expected a checkpoint file")
    return (_BY_SUFFIX.get(target.suffix) or _sniff(target))(target)


def _open_folder(folder: Path, allow_outside: bool) -> CheckpointSource:
    indexes = sorted(folder.glob("*.index.json"), key=lambda p: (".safetensors." not in p.name, p))
    if indexes:
        return open_index(_inside(folder, indexes[0], allow_outside), allow_outside)
    for suffix in _BY_SUFFIX:
        files = [_inside(folder, f, allow_outside) for f in sorted(folder.glob(f"*{suffix}"))]
        if len(files) > 1 and suffix == ".gguf":
            from lazyparams.io.gguf_split_source import open_gguf_folder

            return open_gguf_folder(folder, files)
        if len(files) > 1:
            names = ", ".join(f.name for f in files[:4])
            raise CheckpointError(f"{folder}: several {suffix} files ({names}) and no index")
        if files:
            return _open_file(files[0])
    if any(folder.rglob("*.npy")):
        from lazyparams.io.numpy_source import NpyFolderSource

        return NpyFolderSource(folder, allow_outside_links=allow_outside)
    raise CheckpointError(f"{folder}: no checkpoint found (no index, weights file or .npy files)")


def _inside(folder: Path, found: Path, allow_outside: bool) -> Path:
    """A file found in `folder`, refused when it is a link resolving outside the folder or is
    not a regular file."""
    path = inside_folder(folder, found.name, str(folder), allow_outside)
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file; expected a checkpoint file")
    return path


def _sniff(path: Path) -> Opener:
    """Guess a file's format from its first bytes when its extension says nothing."""
    with open_binary(str(path)) as fp:
        try:
            head = fp.read(9)
        except OSError as err:
            raise CheckpointError(f"{path}: cannot read: {os_reason(err)}") from None
    if head.startswith(b"GGUF"):
        return _gguf
    if head.startswith(b"PK\x03\x04"):
        return _torch if _is_torch_zip(path) else _npz
    if len(head) == 9 and head[8:9] == b"{":
        return _safetensors
    raise CheckpointError(
        f"{path}: cannot tell the checkpoint format (expected .safetensors, .gguf, .bin, .pt, "
        ".pth, .npz, an index .json or a folder)"
    )


def _is_torch_zip(path: Path) -> bool:
    """Whether the zip archive at `path` holds a torch `data.pkl` (else it is taken as npz)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.rsplit("/", 1)[-1] == "data.pkl" for n in archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as err:
        reason = zip_directory_reason(err)
        raise CheckpointError(f"{path}: not a readable zip archive: {reason}") from None


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
