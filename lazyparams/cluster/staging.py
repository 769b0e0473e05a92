"""The output of a cluster run, laid out by the client in DST's work folder before any part.

A format the engine's shard writer writes (safetensors) is that staged checkpoint (so a
killed client resumes it, and so does a one-machine `--resume`): parts write into its shard
files by offset. The others (npz, npy, GGUF, ...) are built the same way in a staged
safetensors file beside DST (`parts_path`), then copied tensor by tensor into the format's own
staged output by the client, in the order one machine writes them, which keeps the result
byte-identical. Both are journaled, so a killed client
resumes either stage: the parts not yet written, then the copy where it stopped. Imports the
engine only.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.engine.destination import Destination
from lazyparams.engine.journal import JOB_FILE
from lazyparams.engine.output import StagedSafetensors, resumable_done
from lazyparams.engine.part_files import (
    CheckpointSource,
    Writer,
    copy_into_sink,
    parts_path,
    source_files,
)
from lazyparams.engine.partition import Partition
from lazyparams.io import TensorInfo

Expected = dict[str, tuple[int, int] | None]


class Staged:
    """Where parts write: `target(name)` is an output's file and offset; `record` journals a
    finished part's outputs; `publish` puts the output in place; `stop` keeps what resumes."""

    def __init__(
        self,
        staged: StagedSafetensors,
        resuming: bool,
        final: Destination | None = None,
        job: dict[str, Any] | None = None,
    ) -> None:
        self.staged, self.final, self.job = staged, final, job or {}
        self.resuming = resuming  # an interrupted run's work is continued
        self.order: Sequence[str] = ()

    def target(self, name: str) -> tuple[str, int]:
        path, offset = self.staged.data_path(name)
        return str(path), offset

    def record(self, names: Sequence[str]) -> None:
        self.staged.record_written(list(names))

    @property
    def done(self) -> set[str]:
        """The outputs already written: by parts into the staged file, or (npz and GGUF) copied
        into the final output by an interrupted publish."""
        copied = self.final.done if self.final is not None else set()
        return set(self.staged.done) | copied

    def publish(self) -> None:
        if self.final is None:
            self.staged.finalize()
            return
        copy_into_sink(self.staged, self.final, self.order, self.job)
        self.staged.abort()

    def stop(self, keep: bool = True) -> None:
        """Keep what a `--resume` continues from (`keep`), or remove it."""
        if keep:
            self.staged.suspend()
        else:
            self.staged.abort()

    def expected_paths(self, source: CheckpointSource, spec: Any) -> Expected:
        """What every worker must see as the client does: SRC's files, the spec file, and the
        work folder (writable, with this run's job file in it)."""
        expected: Expected = {str(p): _stat(p) for p in source_files(source)}
        if isinstance(spec, str | os.PathLike) and Path(spec).is_file():
            expected[str(Path(spec).absolute())] = _stat(Path(spec))
        expected[str(self.staged.work)] = None
        expected[str(self.staged.work / JOB_FILE)] = _stat(self.staged.work / JOB_FILE)
        return expected


def stage_output(
    target: Destination, job: dict[str, Any], partition: Partition, source: CheckpointSource
) -> Staged:
    """Lay out the output the parts will write into (see the module docstring)."""
    assert target.path is not None
    if target.output_format.writer is Writer.SHARDS:
        output = target.open(job)
        assert isinstance(output, StagedSafetensors)
        return Staged(output, target.resuming)
    hidden = parts_path(target.path)
    raw = [as_raw_bytes(info) for info in target.outputs]
    resume = target.resume and resumable_done(hidden, job) is not None
    parts = StagedSafetensors(hidden, raw, None, job, resume)
    staged = Staged(parts, resume or target.resuming, target, job)
    staged.order = [info.name for info in target.outputs]  # the order every layout declares
    return staged


def as_raw_bytes(info: TensorInfo) -> TensorInfo:
    """A GGML block tensor as the uint8 rows it is in memory (safetensors has no block types,
    and the staged copy only carries bytes to the final sink); any other tensor as it is."""
    block = BLOCK_TYPES.get(info.dtype)
    if block is None:
        return info
    return TensorInfo.of(info.name, block.storage_shape(tuple(info.shape)), "uint8")


def _stat(path: Path) -> tuple[int, int]:
    found = path.stat()
    return found.st_size, found.st_mtime_ns


__all__ = ["Staged", "stage_output"]
