"""Reading one .safetensors file: header validated up front, tensors memory-mapped on demand.

A failure while mapping a tensor (a file truncated since it was opened, an mmap error) is a
CheckpointError naming the file and the tensor. Imports numpy and the io layer only; the
safetensors library is not used for reading.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase, open_binary
from lazyparams.io.dtypes import numpy_dtype
from lazyparams.io.filemap import map_array
from lazyparams.io.reasons import os_reason
from lazyparams.io.safetensors_format import Header, parse_header


class SafetensorsSource(SourceBase):
    """A single safetensors file; `load` returns a read-only zero-copy view where aligned."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._file = open_binary(self.path)
        try:
            self.header = self._read_header()
        except BaseException:
            self._file.close()
            raise
        self._infos = {name: entry.info for name, entry in self.header.entries.items()}

    @property
    def metadata(self) -> dict[str, str] | None:
        """The header's `__metadata__`, if it has one."""
        return self.header.metadata

    def load(self, name: str) -> Array:
        """The tensor `name` as a read-only array (a view into the file where alignment allows)."""
        info = self.info(name)
        fd = self._fileno(self._file)
        offset = self._data_offset(name)
        where = f"{self.path}: tensor {name!r}"
        return _mapping(
            where, lambda: map_array(fd, offset, numpy_dtype(info.dtype), info.shape, path=where)
        )

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`, mapping only their bytes."""
        self.info(name)
        fd, offset = self._fileno(self._file), self._data_offset(name)
        where = f"{self.path}: tensor {name!r}"
        return _mapping(where, lambda: self._map_rows(fd, offset, name, start, stop))

    def close(self) -> None:
        """Close the file; arrays already returned keep their own mappings."""
        self._file.close()

    def _data_offset(self, name: str) -> int:
        return self.header.data_start + self.header.entries[name].begin

    def _read_header(self) -> Header:
        try:
            size = os.fstat(self._file.fileno()).st_size
            prefix = self._file.read(8)
            return parse_header(prefix, self._file.read, size, self.path)
        except OSError as err:
            raise CheckpointError(
                f"{self.path}: cannot read the header: {os_reason(err)}"
            ) from None


def _mapping(where: str, load: Callable[[], Array]) -> Array:
    """`load()`, with the OS's and numpy's errors while mapping turned into a CheckpointError
    naming the tensor (`where`), so no bare mmap or reshape error reaches the user."""
    try:
        return load()
    except (OSError, ValueError, BufferError) as err:
        raise CheckpointError(
            f"{where}: cannot map its bytes ({_map_reason(err)}); expected the file to be "
            "unchanged since it was opened"
        ) from None


def _map_reason(err: Exception) -> str:
    """Why mapping a tensor's bytes failed, in our words."""
    if isinstance(err, OSError):
        return os_reason(err)
    if isinstance(err, BufferError):
        return "its buffer is in use"
    return "the file is shorter than the tensor's bytes, or they do not fill its shape"
