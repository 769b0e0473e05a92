"""Reading zip-format `torch.save` checkpoints without torch and without running pickled code.

The pickle goes through the restricted unpickler of torch_pickle; tensor data is memory-mapped
from the archive's `data/` records using each tensor's dtype, offset, shape and stride. Imports
numpy and the io layer only.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase, TensorInfo, open_binary
from lazyparams.io.dtypes import numpy_dtype
from lazyparams.io.filemap import map_array, strided_extent, strided_view
from lazyparams.io.npy_format import member_data_offset
from lazyparams.io.torch_pickle import TensorRecord, read_records

_PICKLE_PROTOCOL_2 = b"\x80\x02"


class TorchSource(SourceBase):
    """A `.bin`/`.pt` state dict written by `torch.save` (zip format, torch 1.6 and later)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._file = open_binary(self.path)
        try:
            self._zip = self._open_zip()
            self._prefix = self._find_prefix()
            self._check_byteorder()
            records = read_records(self._zip.read(f"{self._prefix}data.pkl"), self.path)
        except BaseException:
            self._file.close()
            raise
        self._records = records
        self._infos = {n: TensorInfo.of(n, r.shape, r.dtype) for n, r in records.items()}

    def load(self, name: str) -> Array:
        """The tensor `name` as a read-only (possibly strided) view into the archive."""
        self.info(name)
        fd = self._fileno(self._file)
        record = self._records[name]
        member = self._storage_member(name, record)
        dtype = numpy_dtype(record.dtype)
        where = f"{self.path}[{member.filename}]"
        start = member_data_offset(fd, member, where)
        if start is None:
            elements = np.frombuffer(self._zip.read(member), dtype)[record.offset :]
            return strided_view(elements, record.shape, record.stride)
        offset = start + record.offset * dtype.itemsize
        return map_array(fd, offset, dtype, record.shape, record.stride, path=where)

    def close(self) -> None:
        """Close the archive; arrays already returned stay valid."""
        self._zip.close()
        self._file.close()

    def _open_zip(self) -> zipfile.ZipFile:
        if not zipfile.is_zipfile(self._file):
            self._file.seek(0)
            hint = ""
            if self._file.read(2) == _PICKLE_PROTOCOL_2:
                hint = " (it looks like the legacy pre-zip torch.save format, not supported)"
            raise CheckpointError(f"{self.path}: not a zip-format torch.save file{hint}")
        try:
            return zipfile.ZipFile(self._file)
        except (zipfile.BadZipFile, OSError) as err:
            raise CheckpointError(f"{self.path}: unreadable zip archive: {err}") from None

    def _find_prefix(self) -> str:
        pickles = [n for n in self._zip.namelist() if n.rsplit("/", 1)[-1] == "data.pkl"]
        if len(pickles) != 1:
            raise CheckpointError(f"{self.path}: expected one data.pkl, found {len(pickles)}")
        return pickles[0][: -len("data.pkl")]

    def _check_byteorder(self) -> None:
        name = f"{self._prefix}byteorder"
        if name in self._zip.namelist() and self._zip.read(name).strip() != b"little":
            raise CheckpointError(f"{self.path}: big-endian torch checkpoints are not supported")

    def _storage_member(self, name: str, record: TensorRecord) -> zipfile.ZipInfo:
        """The `data/` record of the tensor's storage, checked to contain the whole tensor."""
        key = f"{self._prefix}data/{record.storage.key}"
        try:
            member = self._zip.getinfo(key)
        except KeyError:
            raise CheckpointError(
                f"{self.path}: tensor {name!r} refers to storage {key!r}, which is missing"
            ) from None
        itemsize = numpy_dtype(record.dtype).itemsize
        extent = strided_extent(record.shape, record.stride)
        if extent and (record.offset + extent) * itemsize > member.file_size:
            raise CheckpointError(
                f"{self.path}: tensor {name!r} reaches past the end of its storage {key!r}"
            )
        return member
