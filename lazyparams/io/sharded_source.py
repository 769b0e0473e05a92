"""A checkpoint split into shards and tied together by an index JSON (`weight_map`).

Works for any per-file source (`model.safetensors.index.json`, `pytorch_model.bin.index.json`);
the caller passes the function that opens one shard. The index is untrusted: it is parsed with
io.limits' bounds, its shards must resolve inside its folder (symlinks included) unless the
caller allows links out, and index and shards must agree tensor for tensor. Imports the io layer.
"""

from __future__ import annotations

import os
import resource
import stat
from collections.abc import Callable
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, CheckpointSource, SourceBase, open_binary
from lazyparams.io.limits import check_name, inside_folder, load_json
from lazyparams.io.partial import load_rows
from lazyparams.io.reasons import os_reason

OpenShard = Callable[[Path], CheckpointSource]
INDEX_LIMIT = 100 * 1000 * 1000
"""The largest index read, in bytes (as for a safetensors header)."""
MAX_SHARDS = 10_000
"""The most shards an index may name: each one is held open while the source is."""


class MultiFileSource(SourceBase):
    """A checkpoint made of several per-file sources: each tensor loads from the member that
    holds it (`_owner`), and closing closes every member (`_members`)."""

    _members: list[CheckpointSource]
    _owner: dict[str, CheckpointSource]

    def load(self, name: str) -> Array:
        """Load `name` from the file that holds it."""
        self.info(name)
        return self._owner[name].load(name)

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of `name`, read by the file that holds it."""
        self.info(name)
        return load_rows(self._owner[name], name, start, stop)

    def close(self) -> None:
        """Close every file."""
        for member in self._members:
            member.close()


class ShardedSource(MultiFileSource):
    """The union of the shards an index names; every shard header is read when it is opened.

    Names come shard by shard (shards sorted by file name), each shard in its own order. Names
    in the weight_map that lead to one file (`a.safetensors`, `./a.safetensors`, a link to it)
    are one shard. A tensor must be in the shard the index names for it and in no other.
    """

    def __init__(
        self,
        index_path: str | os.PathLike[str],
        open_shard: OpenShard,
        *,
        allow_outside_links: bool = False,
    ) -> None:
        self.path = str(index_path)
        self.weight_map = read_weight_map(Path(index_path))
        shards, self._home = _locate_shards(Path(index_path), self.weight_map, allow_outside_links)
        self._listed: dict[str, list[str]] = {real: [] for real in shards}
        for name, real in self._home.items():
            self._listed[real].append(name)
        self._members = []
        self._owner: dict[str, CheckpointSource] = {}
        self._infos = {}
        try:
            for real, (file, path) in shards.items():
                self._add_shard(real, file, open_shard(path))
        except BaseException:
            self.close()
            raise

    @property
    def metadata(self) -> dict[str, str] | None:
        """The shards' safetensors `__metadata__`, merged (a key's first value, shards in
        order), or None when no shard has any."""
        merged: dict[str, str] = {}
        for shard in self._members:
            for key, value in (getattr(shard, "metadata", None) or {}).items():
                merged.setdefault(key, value)
        return merged or None

    def _add_shard(self, real: str, file: str, shard: CheckpointSource) -> None:
        """Take the tensors of `shard` (named `file` in the index), checked against the index."""
        self._members.append(shard)
        for name in shard.names():
            home = self._home.get(name)
            if home is None:
                raise CheckpointError(
                    f"{self.path}: shard {file!r} holds tensor {name!r}, which the weight_map "
                    "does not list; expected the index to list every tensor of its shards"
                )
            if home != real:
                raise CheckpointError(
                    f"{self.path}: tensor {name!r} is in shard {file!r}, but the weight_map "
                    f"puts it in {self.weight_map[name]!r}; expected each tensor in one shard"
                )
            self._infos[name] = shard.info(name)
            self._owner[name] = shard
        self._check_complete(real)

    def _check_complete(self, real: str) -> None:
        """Refuse the index once a shard it was read from lacks a tensor listed there (checked
        shard by shard, so a lying index is refused at its first shard, not its last)."""
        for name in self._listed[real]:
            if name not in self._infos:
                file = self.weight_map[name]
                raise CheckpointError(
                    f"{self.path}: weight_map puts tensor {name!r} in shard {file!r}, "
                    "which has no such tensor; expected the shard to hold every tensor listed"
                )


def read_weight_map(index_path: Path) -> dict[str, str]:
    """The index's weight_map: a non-empty map of tensor names to relative shard file names."""
    raw = load_json(_read_index(index_path), str(index_path), "index")
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index_path}: index has no weight_map of tensor name -> file")
    if not weight_map:
        raise CheckpointError(
            f"{index_path}: the index's weight_map is empty; expected at least one tensor "
            "name -> shard file"
        )
    for name in weight_map:
        check_name(name, f"{index_path}: weight_map")
    files = set(weight_map.values())
    limit = min(MAX_SHARDS, _open_files_limit())
    if len(files) > limit:
        raise CheckpointError(
            f"{index_path}: the index names {len(files)} shards; the limit is {limit} (each "
            f"is held open: at most {MAX_SHARDS}, and what `ulimit -n` leaves)"
        )
    for file in sorted(files):
        _check_shard_name(file, index_path)
    return weight_map


def _open_files_limit() -> int:
    """How many more files this process may hold open, keeping a margin for everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_SHARDS if soft == resource.RLIM_INFINITY else max(soft - 64, 1)


def _read_index(index_path: Path) -> bytes:
    """The index file's bytes, refused past INDEX_LIMIT before any is read."""
    with open_binary(str(index_path)) as file:
        try:
            size = os.fstat(file.fileno()).st_size
            if size > INDEX_LIMIT:
                raise CheckpointError(
                    f"{index_path}: index of {size} bytes exceeds the limit of {INDEX_LIMIT}"
                )
            return file.read(INDEX_LIMIT + 1)
        except OSError as err:
            raise CheckpointError(
                f"{index_path}: cannot read the index: {os_reason(err)}"
            ) from None


def _check_shard_name(file: str, index_path: Path) -> None:
    """Refuse a shard name that is empty, not a file name the OS takes, or another index."""
    where = f"{index_path}: shard {file!r}"
    if not file.strip() or "\x00" in file:
        raise CheckpointError(f"{where} is not a file name; expected a path inside the folder")
    try:
        file.encode("utf-8")
    except UnicodeEncodeError:
        raise CheckpointError(f"{where} is not valid Unicode (a lone surrogate)") from None
    if file.endswith(".index.json"):
        raise CheckpointError(f"{where} is an index, not a shard; expected a weights file")


def _locate_shards(
    index_path: Path, weight_map: dict[str, str], allow_outside: bool
) -> tuple[dict[str, tuple[str, Path]], dict[str, str]]:
    """Each shard's real path -> (its first name in the index, the path to open), and each
    tensor's shard by real path; missing shards and shards outside the folder are refused."""
    folder = index_path.parent
    root = os.path.realpath(folder)
    located = {file: folder / file for file in sorted(set(weight_map.values()))}
    real: dict[str, str] = {}
    for file, path in located.items():
        if _plainly_inside(folder, file):
            real[file] = os.path.join(root, file)
        else:
            inside_folder(folder, file, f"{index_path}: weight_map", allow_outside)
            real[file] = os.path.realpath(path)
    missing = [file for file, path in located.items() if not _is_file(path)]
    if missing:
        shown = ", ".join(repr(file) for file in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise CheckpointError(
            f"{index_path}: weight_map names {len(missing)} shard(s) that do not exist or are "
            f"not files: {shown}{more}; expected all {len(located)} shards beside the index"
        )
    shards: dict[str, tuple[str, Path]] = {}
    for file, path in located.items():
        shards.setdefault(real[file], (file, path))
    return shards, {name: real[file] for name, file in weight_map.items()}


def _is_file(path: Path) -> bool:
    """Whether `path` is a regular file (a name the OS refuses, such as one too long, is not)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _plainly_inside(folder: Path, file: str) -> bool:
    """Whether `file` is a bare name that is no link (a regular file, or nothing): inside
    `folder` without resolving anything, the common case, kept cheap for indexes of thousands
    of shards."""
    if "/" in file or file in (".", ".."):
        return False
    try:
        return stat.S_ISREG(os.lstat(folder / file).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False
