"""The files of a partitioned run: outputs written by offset into files laid out elsewhere,
and a staged safetensors file copied into another format's staged output.

The cluster layer uses these and the types it names from the layers below through this module,
as it imports the engine only. Imports `io` and the engine's own modules.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazyparams.engine.destination import Destination
from lazyparams.engine.journal import work_dir
from lazyparams.engine.output import StagedSafetensors
from lazyparams.errors import CheckpointError
from lazyparams.io import CheckpointSource, SafetensorsSource, TensorInfo, check_declared
from lazyparams.io.filemap import write_array_at
from lazyparams.io.output_formats import Writer
from lazyparams.io.partial import flat_block, flat_info, rows_offset
from lazyparams.io.source_formats import source_files
from lazyparams.ir import IRModule

_SYNC = getattr(os, "fdatasync", os.fsync)


class OffsetOutput:
    """Writes outputs at fixed offsets of files that already exist (laid out by the client)."""

    def __init__(self, targets: dict[str, tuple[str, int]], infos: dict[str, TensorInfo]) -> None:
        self.targets, self.infos = targets, infos
        self.files = tuple(sorted({path for path, _ in targets.values()}))
        self._fds: dict[str, int] = {}

    def _fd(self, name: str) -> tuple[int, int]:
        """The open file of output `name` (opened on first use) and its offset there."""
        path, offset = self.targets[name]
        if path not in self._fds:
            try:
                self._fds[path] = os.open(path, os.O_RDWR)
            except OSError as err:
                raise CheckpointError(
                    f"{path}: cannot open the output file laid out by the client: {err}; "
                    "expected it on storage this worker shares"
                ) from None
        return self._fds[path], offset

    def write(self, name: str, array: Any) -> None:
        check_declared(self.targets[name][0], self.infos, name, array)
        fd, offset = self._fd(name)
        write_array_at(fd, array, offset)

    def write_rows(self, name: str, start: int, block: Any) -> None:
        info = self.infos[name]
        first, rows = flat_block(info, int(start), block)
        assert isinstance(first, int)
        fd, offset = self._fd(name)
        write_array_at(fd, rows, offset + rows_offset(flat_info(info), first))

    def finalize(self) -> None:
        """Sync every file written, so the client may journal the part as done."""
        for fd in self._fds.values():
            _SYNC(fd)

    def abort(self) -> None:
        self.close()

    def suspend(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the files (idempotent)."""
        while self._fds:
            os.close(self._fds.popitem()[1])


def copy_into_sink(
    staged: StagedSafetensors, final: Destination, order: Sequence[str], job: dict[str, Any]
) -> None:
    """Copy every output from the staged file into the format's own staged output (laid out
    as one machine lays it out), then publish it. Outputs an interrupted copy already wrote
    (`final.done`, verified when the destination was prepared) are not copied again."""
    assert final.path is not None
    data, _ = staged.data_path(order[0]) if order else (None, 0)
    output = final.open(job)
    try:
        if data is not None:
            with SafetensorsSource(data) as parts:
                for name in order:
                    if name not in final.done:
                        output.write(name, parts.load(name))
        output.finalize()
    except BaseException:
        output.abort()
        raise


def parts_path(dst: Path) -> Path:
    """Where the parts of an npz or GGUF output are staged: a hidden file beside `dst`."""
    return dst.parent / f".{dst.name}.parts"


def partial_work(dst: Path) -> Path | None:
    """The work folder an interrupted run into `dst` left for `--resume`, if any: DST's own,
    or that of a cluster run's staged parts."""
    for work in (work_dir(dst), work_dir(parts_path(dst))):
        if work.exists():
            return work
    return None


__all__ = [
    "CheckpointSource",
    "IRModule",
    "OffsetOutput",
    "TensorInfo",
    "Writer",
    "copy_into_sink",
    "partial_work",
    "parts_path",
    "source_files",
]
