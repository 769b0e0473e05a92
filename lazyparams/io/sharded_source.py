"""A checkpoint split into shards and tied together by an index JSON (`weight_map`).

Works for any per-file source (`model.safetensors.index.json`, `pytorch_model.bin.index.json`);
the caller passes the function that opens one shard. Imports the io layer only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, CheckpointSource, SourceBase
from lazyparams.io.partial import load_rows

OpenShard = Callable[[Path], CheckpointSource]


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

    Names come shard by shard (shards sorted by file name), each shard in its own order.
    """

    def __init__(self, index_path: str | os.PathLike[str], open_shard: OpenShard) -> None:
        self.path = str(index_path)
        self.weight_map = _read_weight_map(Path(index_path))
        self._members = []
        self._owner: dict[str, CheckpointSource] = {}
        self._infos = {}
        try:
            for file in sorted(set(self.weight_map.values())):
                self._add_shard(file, open_shard)
        except BaseException:
            self.close()
            raise
        self._check_complete()

    def _add_shard(self, file: str, open_shard: OpenShard) -> None:
        shard_path = Path(self.path).parent / file
        if not shard_path.is_file():
            raise CheckpointError(
                f"{self.path}: weight_map names shard {file!r}, which does not exist"
            )
        shard = open_shard(shard_path)
        self._members.append(shard)
        for name in shard.names():
            if self.weight_map.get(name) == file:
                self._infos[name] = shard.info(name)
                self._owner[name] = shard

    def _check_complete(self) -> None:
        for name, file in self.weight_map.items():
            if name not in self._infos:
                self.close()
                raise CheckpointError(
                    f"{self.path}: weight_map puts tensor {name!r} in shard {file!r}, "
                    "which has no such tensor"
                )


def _read_weight_map(index_path: Path) -> dict[str, str]:
    """The index's weight_map, checked to map names to plain relative file names."""
    try:
        raw = json.loads(index_path.read_text(encoding="utf-8"))
    except OSError as err:
        raise CheckpointError(f"{index_path}: cannot read the index: {err.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{index_path}: index is not valid JSON: {err}") from None
    weight_map = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{index_path}: index has no weight_map of tensor name -> file")
    for file in set(weight_map.values()):
        parts = PurePosixPath(file).parts
        if not parts or file.startswith("/") or ".." in parts:
            raise CheckpointError(f"{index_path}: shard {file!r} is not a path inside the folder")
    return weight_map
