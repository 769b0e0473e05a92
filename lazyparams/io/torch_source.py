"""Reading zip-format `torch.save` checkpoints without torch and without running pickled code.

The pickle goes through the restricted unpickler of torch_pickle; tensor data is memory-mapped
from the archive's `data/` records using each tensor's dtype, offset, shape and stride (a
deflated record, which torch never writes, is inflated in bounded chunks instead). Every tensor
is checked when the file is opened: its storage must exist and hold exactly the size the pickle
declares, the tensor must lie inside it, and no two of its elements may share storage (no
stride-0 or overlapping strides), so a tensor never holds more elements than its storage.
Imports numpy and the io layer only.
"""

from __future__ import annotations

import os

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase, TensorInfo, open_binary
from lazyparams.io.dtypes import numpy_dtype
from lazyparams.io.filemap import map_array, strided_extent, strided_view
from lazyparams.io.partial import check_rows
from lazyparams.io.pickle_bounds import MAX_PICKLE_BYTES
from lazyparams.io.torch_pickle import TensorRecord, read_records
from lazyparams.io.zip_members import INFLATE_BUFFER_BYTES, Member, ZipMembers

_PICKLE_PROTOCOL_2 = b"\x80\x02"


class TorchSource(SourceBase):
    """A `.bin`/`.pt` state dict written by `torch.save` (zip format, torch 1.6 and later)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._file = open_binary(self.path)
        try:
            self._check_zip()
            self._zip = ZipMembers(self._file, self.path)
            self._prefix = self._find_prefix()
            self._check_byteorder()
            pickled = self._zip.read(self._required("data.pkl"), MAX_PICKLE_BYTES, "data.pkl")
            self._records = read_records(pickled, self.path)
            self._storages = {n: self._storage_member(n, r) for n, r in self._records.items()}
        except BaseException:
            self._file.close()
            raise
        self._infos = {n: TensorInfo.of(n, r.shape, r.dtype) for n, r in self._records.items()}

    def load(self, name: str) -> Array:
        """The tensor `name` as a read-only (possibly strided) view into the archive."""
        self.info(name)
        fd = self._fileno(self._file)
        record, member = self._records[name], self._storages[name]
        dtype = numpy_dtype(record.dtype)
        if member.compressed:
            return self._inflated(record, member)
        offset = member.start + record.offset * dtype.itemsize
        where = self._zip.where(member)
        return map_array(fd, offset, dtype, record.shape, record.stride, path=where)

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`: of a C-ordered tensor only those rows, mapped or
        inflated; otherwise a slice of the mapped tensor."""
        record, member = self._records[self.info(name).name], self._storages[name]
        if record.stride != _c_strides(record.shape):
            return super().load_rows(name, start, stop)
        fd = self._fileno(self._file)
        if not member.compressed:
            at = member.start + record.offset * numpy_dtype(record.dtype).itemsize
            return self._map_rows(fd, at, name, start, stop)
        first, end = check_rows(self.info(name), start, stop, self.path)
        row = int(np.prod(record.shape[1:], dtype=np.int64))
        part = TensorRecord(
            record.storage, record.dtype, record.offset + first * row,
            (end - first, *record.shape[1:]), record.stride,
        )  # fmt: skip
        return self._inflated(part, member)

    def read_buffer_bytes(self, name: str) -> int:
        """Bytes a load of `name` holds beside the tensor it returns: the inflating buffers,
        and the storage span read to gather a strided tensor, for a deflated record."""
        record, member = self._records[self.info(name).name], self._storages[name]
        if not member.compressed:
            return 0
        extent = strided_extent(record.shape, record.stride)
        spread = extent > int(np.prod(record.shape, dtype=np.int64))
        itemsize = numpy_dtype(record.dtype).itemsize
        return INFLATE_BUFFER_BYTES + (extent * itemsize if spread else 0)

    def close(self) -> None:
        """Close the archive; arrays already returned stay valid."""
        self._file.close()

    def _inflated(self, record: TensorRecord, member: Member) -> Array:
        """The tensor of `record` from a deflated storage: the span it covers inflated, then
        copied out when its strides leave gaps."""
        dtype = numpy_dtype(record.dtype)
        extent = strided_extent(record.shape, record.stride)
        span = np.empty(extent * dtype.itemsize, np.uint8)
        self._zip.read_into(member, record.offset * dtype.itemsize, span.data)
        array = strided_view(span.view(dtype), record.shape, record.stride)
        if extent > array.size:
            array = np.ascontiguousarray(array)
        array.flags.writeable = False
        return array

    def _check_zip(self) -> None:
        """Refuse a file that is no zip archive, naming the legacy format when it is that."""
        head = os.pread(self._file.fileno(), 4, 0)
        if head.startswith(b"PK"):
            return
        hint = ""
        if head.startswith(_PICKLE_PROTOCOL_2):
            hint = " (it looks like the legacy pre-zip torch.save format, not supported)"
        raise CheckpointError(f"{self.path}: not a zip-format torch.save file{hint}")

    def _find_prefix(self) -> str:
        """The folder inside the archive holding data.pkl (torch names it after the file)."""
        pickles = [n for n in self._zip.members if n.rsplit("/", 1)[-1] == "data.pkl"]
        if len(pickles) != 1:
            raise CheckpointError(f"{self.path}: expected one data.pkl, found {len(pickles)}")
        return pickles[0][: -len("data.pkl")]

    def _required(self, name: str) -> Member:
        """The member `name` of that folder."""
        return self._zip.members[f"{self._prefix}{name}"]

    def _check_byteorder(self) -> None:
        """Refuse a big-endian checkpoint (its storages would read as wrong numbers)."""
        member = self._zip.members.get(f"{self._prefix}byteorder")
        if member is not None and self._zip.read(member, 16, "byteorder").strip() != b"little":
            raise CheckpointError(f"{self.path}: big-endian torch checkpoints are not supported")

    def _storage_member(self, name: str, record: TensorRecord) -> Member:
        """The `data/` record of the tensor's storage, checked to hold exactly the declared
        storage and, within it, the whole tensor without shared elements."""
        key = f"{self._prefix}data/{record.storage.key}"
        where = f"{self.path}: tensor {name!r}"
        member = self._zip.members.get(key)
        if member is None:
            raise CheckpointError(f"{where} refers to storage {key!r}, which is missing")
        declared = record.storage.numel * numpy_dtype(record.storage.dtype or "uint8").itemsize
        if member.size != declared:
            raise CheckpointError(
                f"{where}: storage {key!r} holds {member.size} bytes; the pickle declares "
                f"{record.storage.numel} elements ({declared} bytes)"
            )
        itemsize = numpy_dtype(record.dtype).itemsize
        if _shares_elements(record.shape, record.stride):
            raise CheckpointError(
                f"{where}: strides {list(record.stride)} for shape {list(record.shape)} make "
                "elements share storage (stride 0 or overlap); expected each element stored once"
            )
        extent = strided_extent(record.shape, record.stride)
        if extent and (record.offset + extent) * itemsize > member.size:
            raise CheckpointError(
                f"{where} reaches past the end of its storage {key!r} (elements "
                f"[{record.offset}, {record.offset + extent}) of {record.dtype}; the storage "
                f"holds {member.size} bytes)"
            )
        return member


def _shares_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether two indices of a non-empty tensor can reach one storage element: taking the
    dims by increasing stride, each stride must pass the span of the dims before it."""
    if 0 in shape:
        return False
    reach = 0
    for step, length in sorted((s, n) for n, s in zip(shape, stride, strict=True) if n > 1):
        if step <= reach:
            return True
        reach += (length - 1) * step
    return False


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-ordered tensor of `shape`."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))
