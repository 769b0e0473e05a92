"""Reading one .safetensors file: header validated up front, tensors memory-mapped on demand.

Imports numpy and the io layer only; the safetensors library is not used for reading.
"""

from __future__ import annotations

import os

from lazyparams.io.base import Array, SourceBase, open_binary
from lazyparams.io.dtypes import numpy_dtype
from lazyparams.io.filemap import map_array
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
        offset = self.header.data_start + self.header.entries[name].begin
        return map_array(fd, offset, numpy_dtype(info.dtype), info.shape, path=self.path)

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`, mapping only their bytes."""
        self.info(name)
        offset = self.header.data_start + self.header.entries[name].begin
        return self._map_rows(self._fileno(self._file), offset, name, start, stop)

    def close(self) -> None:
        """Close the file; arrays already returned keep their own mappings."""
        self._file.close()

    def _read_header(self) -> Header:
        size = os.fstat(self._file.fileno()).st_size
        prefix = self._file.read(8)

        return parse_header(prefix, self._file.read, size, self.path)
