"""Reading .npz archives and folders of .npy files, never unpickling.

npz members stored uncompressed are memory-mapped in place; deflated ones are inflated in
bounded chunks straight into the tensor (or the block of rows) asked for, so memory holds the
output and `INFLATE_BUFFER_BYTES` at most. Every member and file must hold exactly the bytes its
header declares. A folder's files, links included, must lie inside it unless links out are
allowed. Imports numpy and the io layer only.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase, open_binary
from lazyparams.io.filemap import map_array
from lazyparams.io.limits import check_name, inside_folder, load_json
from lazyparams.io.npy_format import (
    COMMENT_PREFIX,
    DTYPES_FILE,
    NpyHeader,
    check_data_size,
    fortran_strides,
    read_npy_header,
    tensor_info,
    to_tensor,
)
from lazyparams.io.partial import check_rows
from lazyparams.io.zip_members import CHUNK_BYTES, INFLATE_BUFFER_BYTES, Member, ZipMembers

MAX_TAGS_BYTES = 16 * 1024 * 1024
"""The largest dtype tag file read."""


class NpzSource(SourceBase):
    """A .npz archive; names are the member names without `.npy`, in archive order."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._file = open_binary(self.path)
        self._members: dict[str, tuple[Member, NpyHeader]] = {}
        self._infos = {}
        try:
            self._zip = ZipMembers(self._file, self.path, ".npz archive")
            self._crc_checked: set[str] = set()
            for member in self._zip.members.values():
                if member.name.endswith(".npy"):
                    self._add(member)
        except BaseException:
            self._file.close()
            raise

    def load(self, name: str) -> Array:
        """The tensor `name`: a view into the archive when stored uncompressed."""
        info = self.info(name)
        member, header = self._members[name]
        fd = self._fileno(self._file)
        self._check_stored(member)
        if member.compressed:
            flat = self._inflate(member, header.length, header.data_bytes)
            order: Literal["F", "C"] = "F" if header.fortran else "C"
            stored = flat.view(header.stored).reshape(header.shape, order=order)
        else:
            strides = fortran_strides(header.shape) if header.fortran else None
            start = member.start + header.length
            where = self._zip.where(member)
            stored = map_array(fd, start, header.stored, header.shape, strides, path=where)
        return to_tensor(stored, info)

    def load_rows(self, name: str, start: int, stop: int) -> Array:
        """Rows [start, stop) of tensor `name`: of a stored member just those rows mapped; of a
        deflated one only what reaches them inflated, blocks read in order continuing one
        stream."""
        info = self.info(name)
        member, header = self._members[name]
        c_order = not header.fortran or len(header.shape) < 2
        if not member.compressed:
            fd = self._fileno(self._file)
            self._check_stored(member)
            if c_order and header.stored.isnative:  # just the rows, even when unaligned
                return self._map_rows(fd, member.start + header.length, name, start, stop)
            return super().load_rows(name, start, stop)
        first, end = check_rows(info, start, stop, self.path)
        self._fileno(self._file)
        if not c_order:
            stored = self._fortran_rows(member, header, first, end)
        else:
            row = header.data_bytes // header.shape[0]
            flat = self._inflate(member, header.length + first * row, (end - first) * row)
            stored = flat.view(header.stored).reshape(end - first, *header.shape[1:])
        return to_tensor(stored, info)

    def read_buffer_bytes(self, name: str) -> int:
        """Bytes a load of `name` holds beside the tensor it returns (its inflating buffers)."""
        member, _header = self._members[self.info(name).name]
        return INFLATE_BUFFER_BYTES if member.compressed else 0

    def close(self) -> None:
        """Close the archive; arrays already returned stay valid."""
        self._file.close()

    def _add(self, member: Member) -> None:
        """List one .npy member: its name, header and declared size checked."""
        where = self._zip.where(member)
        name = check_name(member.name[: -len(".npy")], where)
        tag = None
        if member.comment.startswith(COMMENT_PREFIX):
            tag = member.comment[len(COMMENT_PREFIX) :].decode("ascii", "replace")
        header = read_npy_header(lambda count: self._prefix(member, count), where)
        check_data_size(header, member.size - header.length, where)
        self._infos[name] = tensor_info(name, header, tag, where)
        self._members[name] = (member, header)

    def _check_stored(self, member: Member) -> None:
        """Check a stored member's CRC-32 once, at its first read (a deflated one is checked
        as it inflates)."""
        if not member.compressed and member.name not in self._crc_checked:
            self._zip.check_stored(member)
            self._crc_checked.add(member.name)

    def _prefix(self, member: Member, count: int) -> bytes:
        """The first `count` bytes of `member` (fewer when it is shorter)."""
        return self._inflate(member, 0, min(count, member.size)).tobytes()

    def _inflate(self, member: Member, start: int, count: int) -> Array:
        """Bytes [start, start + count) of `member` as a new uint8 array."""
        out = np.empty(count, np.uint8)
        self._zip.read_into(member, start, out.data)
        return out

    def _fortran_rows(self, member: Member, header: NpyHeader, first: int, end: int) -> Array:
        """Rows [first, end) of a Fortran-ordered member, gathered from its fibers along
        axis 0 (each holds one element of every row), a chunk of fibers at a time."""
        length, itemsize = header.shape[0], header.stored.itemsize
        fibers = math.prod(header.shape[1:])
        out = np.empty((fibers, end - first), header.stored)
        per = max(1, CHUNK_BYTES // max(1, length * itemsize))
        for fiber in range(0, fibers, per):
            count = min(per, fibers - fiber)
            at = header.length + fiber * length * itemsize
            if per == 1:
                out[fiber] = self._inflate(member, at + first * itemsize, (end - first) * itemsize)
            else:
                chunk = self._inflate(member, at, count * length * itemsize).view(header.stored)
                out[fiber : fiber + count] = chunk.reshape(count, length)[:, first:end]
        reverse = tuple(range(len(header.shape) - 1, -1, -1))
        return out.reshape(*header.shape[:0:-1], end - first).transpose(reverse)


class NpyFolderSource(SourceBase):
    """A folder of .npy files (searched recursively); a name is the relative path minus `.npy`.

    Files and subfolders reached through symlinks must resolve inside the folder unless
    `allow_outside_links` is True; a link back to a folder already listed is not followed.
    """

    def __init__(self, path: str | os.PathLike[str], allow_outside_links: bool = False) -> None:
        self.path = str(path)
        self.allow_outside_links = allow_outside_links
        folder = Path(path)
        if not folder.is_dir():
            raise CheckpointError(f"{self.path}: not a folder")
        tags = _read_tags(folder, allow_outside_links, self.path)
        self._files: dict[str, tuple[Path, NpyHeader]] = {}
        self._infos = {}
        for relative in _npy_files(folder, allow_outside_links, self.path):
            file = inside_folder(folder, relative, self.path, allow_outside_links)
            name = check_name(relative[: -len(".npy")], self.path)
            header = _file_header(file)
            self._infos[name] = tensor_info(name, header, tags.get(name), str(file))
            self._files[name] = (file, header)

    def load(self, name: str) -> Array:
        """The tensor `name`, memory-mapped from its file."""
        info = self.info(name)
        file, header = self._files[name]
        with open_binary(str(file)) as fp:
            if _file_header(file) != header:
                raise CheckpointError(f"{file}: changed since it was listed")
            strides = fortran_strides(header.shape) if header.fortran else None
            fd = fp.fileno()
            stored = map_array(
                fd, header.length, header.stored, header.shape, strides, path=str(file)
            )
        return to_tensor(stored, info)


def _file_header(file: Path) -> NpyHeader:
    """The header of one .npy file, checked to be followed by exactly its data."""
    with open_binary(str(file)) as fp:
        fd = fp.fileno()
        header = read_npy_header(lambda count: os.pread(fd, count, 0), str(file))
        check_data_size(header, os.fstat(fd).st_size - header.length, str(file))
    return header


def _npy_files(folder: Path, allow_outside: bool, where: str) -> list[str]:
    """Relative paths of the .npy files under `folder`, entering each real folder once and a
    linked subfolder only when it resolves inside `folder` (or `allow_outside`)."""
    seen = {os.path.realpath(folder)}
    found: list[str] = []
    pending = [""]
    while pending:
        relative = pending.pop()
        for entry in _entries(folder / relative):
            child = f"{relative}/{entry.name}" if relative else entry.name
            if _is_dir(entry):
                real = os.path.realpath(inside_folder(folder, child, where, allow_outside))
                if real not in seen:
                    seen.add(real)
                    pending.append(child)
            elif entry.name.endswith(".npy"):
                found.append(child)
    return sorted(found)


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of `directory`, by name."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError as err:
        raise CheckpointError(f"{directory}: cannot list the folder: {err.strerror}") from None


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether `entry` is a folder, links followed (a broken link is not)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _read_tags(folder: Path, allow_outside: bool, where: str) -> dict[str, str]:
    """The folder's dtype tags (name -> dtype name), or none if it has no tag file."""
    path = folder / DTYPES_FILE
    if not path.exists():
        return {}
    inside_folder(folder, DTYPES_FILE, where, allow_outside)
    try:
        with open(path, "rb") as fp:
            data = fp.read(MAX_TAGS_BYTES + 1)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read the dtype tags: {err.strerror}") from None
    if len(data) > MAX_TAGS_BYTES:
        raise CheckpointError(f"{path}: dtype tags over {MAX_TAGS_BYTES} bytes")
    tags: Any = load_json(data, str(path), "the dtype tags")
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise CheckpointError(f"{path}: expected a JSON object of tensor name -> dtype")
    return tags
