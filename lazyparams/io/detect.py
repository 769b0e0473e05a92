"""Choosing a source for a path: `open_source` detects the format (sinks: `output_formats`).

Detection goes by extension, then by folder contents, then by the file's first bytes. Imports the
io layer only, each format's module when a path of that format is opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import CheckpointSource, open_binary
from lazyparams.io.limits import inside_folder
from lazyparams.io.reasons import os_reason
from lazyparams.io.source_formats import (
    SNIFF_BYTES,
    SOURCE_FORMATS,
    SourceFormat,
    file_suffixes,
    format_list,
    format_of_suffix,
    sniff_format,
)


def open_source(
    path: str | os.PathLike[str], allow_outside_links: bool = False
) -> CheckpointSource:
    """Open a checkpoint file or folder, detecting its format.

    A folder is read through its `*.index.json` if it has one (safetensors first), else through
    the first format of `SOURCE_FORMATS` it holds files of: its single file of that format (or
    the parts of one split GGUF), or a folder format's files (.npy). A part of a split GGUF
    opens the whole set. The files a folder or an index leads to must resolve inside that
    folder (or its Hugging Face cache entry), symlinks included, unless `allow_outside_links`.
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


def shard_opener(index: Path) -> Callable[[Path], CheckpointSource]:
    """How the shards of `index` open: as files of the kind its name says
    (`model.safetensors.index.json`: safetensors), never as an index or a folder, so an index
    naming itself or another index is refused instead of recursing."""
    kind = Path(index.name.removesuffix(".index.json")).suffix

    def open_shard(shard: Path) -> CheckpointSource:
        if format_of_suffix(kind) is not None and shard.suffix != kind:
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
    entry = format_of_suffix(target.suffix) or _sniff(target)
    assert entry.opener is not None  # only formats of single files are found by name or bytes
    source: CheckpointSource = entry.load(entry.opener)(target)
    return source


def _open_folder(folder: Path, allow_outside: bool) -> CheckpointSource:
    indexes = sorted(folder.glob("*.index.json"), key=lambda p: (".safetensors." not in p.name, p))
    if indexes:
        return open_index(_inside(folder, indexes[0], allow_outside), allow_outside)
    for entry in SOURCE_FORMATS.values():
        found = _open_format(folder, entry, allow_outside) if entry.in_folders else None
        if found is not None:
            return found
    raise CheckpointError(
        f"{folder}: no checkpoint found; expected an index (*.index.json) or the files of one "
        f"format: {format_list()}"
    )


def _open_format(folder: Path, entry: SourceFormat, allow_outside: bool) -> CheckpointSource | None:
    """The checkpoint `folder` holds in the format of `entry`, or None when it holds none."""
    if entry.tree is not None:
        if not any(any(folder.rglob(f"*{suffix}")) for suffix in entry.suffixes):
            return None
        opened: CheckpointSource = entry.load(entry.tree)(folder, allow_outside_links=allow_outside)
        return opened
    files = [
        _inside(folder, f, allow_outside)
        for suffix in entry.suffixes
        for f in sorted(folder.glob(f"*{suffix}"))
    ]
    if len(files) > 1 and entry.several is not None:
        opened = entry.load(entry.several)(folder, files)
        return opened
    if len(files) > 1:
        names = ", ".join(f.name for f in files[:4])
        kinds = " / ".join(dict.fromkeys(f.suffix for f in files))
        raise CheckpointError(f"{folder}: several {kinds} files ({names}) and no index")
    return _open_file(files[0]) if files else None


def _inside(folder: Path, found: Path, allow_outside: bool) -> Path:
    """A file found in `folder`, refused when it is a link resolving outside the folder or is
    not a regular file."""
    path = inside_folder(folder, found.name, str(folder), allow_outside)
    if not path.is_file():
        raise CheckpointError(f"{path}: not a regular file; expected a checkpoint file")
    return path


def _sniff(path: Path) -> SourceFormat:
    """Guess a file's format from its first bytes when its extension says nothing."""
    with open_binary(str(path)) as fp:
        try:
            head = fp.read(SNIFF_BYTES)
        except OSError as err:
            raise CheckpointError(f"{path}: cannot read: {os_reason(err)}") from None
    entry = sniff_format(head, path)
    if entry is None:
        raise CheckpointError(
            f"{path}: cannot tell the checkpoint format (expected {', '.join(file_suffixes())}, "
            "an index .json or a folder)"
        )
    return entry
