"""`PlacedSink`: a sink whose files are laid out up front and whose tensors land at their offsets.

The safetensors and GGUF sinks share it: each lays out its staged files (header, table, size),
registers where every tensor's data starts, and leaves storing, publishing and removal to this
class. Imports the io layer only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from lazyparams.io.base import Array, SinkBase, TensorInfo
from lazyparams.io.filemap import write_array_at
from lazyparams.io.partial import flat_info, rows_offset
from lazyparams.io.staging import Staging


class PlacedSink(SinkBase):
    """A `SinkBase` writing each tensor at its offset in a staged file opened by `_place`."""

    def __init__(self, path: str, infos: Sequence[TensorInfo]) -> None:
        super().__init__(path, infos)
        self._staging = Staging()
        self._fds: list[int] = []
        self._where: dict[str, tuple[int, int]] = {}

    def _place(self, temp: Path, offsets: Mapping[str, int]) -> int:
        """Open the staged file `temp` for writing; its tensors start at `offsets`."""
        fd = os.open(temp, os.O_RDWR)
        self._fds.append(fd)
        self._where.update((name, (fd, offset)) for name, offset in offsets.items())
        return fd

    def _store(self, name: str, array: Array) -> None:
        fd, offset = self._where[name]
        write_array_at(fd, array, offset)

    def _store_rows(self, name: str, start: int, block: Array) -> None:
        fd, offset = self._where[name]
        write_array_at(fd, block, offset + rows_offset(flat_info(self.infos[name]), start))

    def _commit(self) -> None:
        self._close_fds()
        self._staging.commit()

    def _discard(self) -> None:
        self._close_fds()
        self._staging.discard()

    def _close_fds(self) -> None:
        while self._fds:
            os.close(self._fds.pop())
