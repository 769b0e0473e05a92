"""Streaming safetensors writer, optionally sharded with an HF-style index.

Every header is computed from the declared tensors before any data exists; each tensor is then
written at its offset the moment it arrives, in any order, and not kept. A single shard is
byte-identical to the reference `save_file`. Imports the io layer only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lazyparams.io.base import TensorInfo
from lazyparams.io.placed_sink import PlacedSink
from lazyparams.io.safetensors_format import build_header

INDEX_SUFFIX = ".safetensors.index.json"


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """Where the output goes: one file per shard (with its tensors) and the index, if any."""

    shards: list[tuple[Path, list[TensorInfo]]]
    index: Path | None


def plan_shards(path: Path, infos: Sequence[TensorInfo], max_shard_size: int | None) -> ShardPlan:
    """Split `infos` greedily, in declared order, into shards of at most `max_shard_size` bytes.

    Without a size, `path` is the file (or a folder that gets `model.safetensors`). With one, the
    shards are `{stem}-00001-of-0000N.safetensors` in the folder, `stem` being the file name's
    stem or `model`; a single shard keeps the plain name and gets no index, as HF does.
    """
    is_file = path.suffix == ".safetensors"
    folder, stem = (path.parent, path.stem) if is_file else (path, "model")
    if max_shard_size is None:
        return ShardPlan([(path if is_file else folder / "model.safetensors", list(infos))], None)
    groups: list[list[TensorInfo]] = [[]]
    size = 0
    for info in infos:
        if groups[-1] and size + info.nbytes > max_shard_size:
            groups.append([])
            size = 0
        groups[-1].append(info)
        size += info.nbytes
    if len(groups) == 1:
        return ShardPlan([(folder / f"{stem}.safetensors", groups[0])], None)
    count = len(groups)
    names = [folder / f"{stem}-{i + 1:05d}-of-{count:05d}.safetensors" for i in range(count)]
    return ShardPlan(list(zip(names, groups, strict=True)), folder / f"{stem}{INDEX_SUFFIX}")


def index_json(plan: ShardPlan) -> bytes:
    """The index file: total data size and the shard of every tensor, keys sorted."""
    weight_map = {info.name: file.name for file, group in plan.shards for info in group}
    total = sum(info.nbytes for _, group in plan.shards for info in group)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    return (json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8")


class SafetensorsSink(PlacedSink):
    """Writes declared tensors into preallocated safetensors files as they arrive.

    Output goes to temporaries beside the final names; `finalize` fsyncs and renames them into
    place, `abort` deletes them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        infos: Sequence[TensorInfo],
        *,
        max_shard_size: int | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(str(path), infos)
        self.plan = plan_shards(Path(path), infos, max_shard_size)
        try:
            for final, group in self.plan.shards:
                self._open_shard(final, group, metadata)
            if self.plan.index is not None:
                temp = self._staging.new_file(self.plan.index)
                temp.write_bytes(index_json(self.plan))
        except BaseException:
            self.abort()
            raise

    @property
    def files(self) -> list[Path]:
        """The final paths this sink publishes: shards, then the index if there is one."""
        index = [] if self.plan.index is None else [self.plan.index]
        return [final for final, _ in self.plan.shards] + index

    def _open_shard(
        self, final: Path, group: list[TensorInfo], metadata: dict[str, str] | None
    ) -> None:
        header, offsets = build_header(group, metadata, path=str(final))
        fd = self._place(self._staging.new_file(final), offsets)
        os.pwrite(fd, header, 0)
        os.ftruncate(fd, len(header) + sum(info.nbytes for info in group))
