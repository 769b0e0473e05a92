"""Reading .npz archives and folders of .npy files, never unpickling.

npz members stored uncompressed are memory-mapped in place; compressed ones are read whole. Each
.npy of a folder is opened with numpy's mmap mode. Imports numpy and the io layer only.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import numpy.lib.format as npy

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SourceBase
from lazyparams.io.filemap import map_array
from lazyparams.io.npy_format import (
    COMMENT_PREFIX,
    DTYPES_FILE,
    NpyHeader,
    fortran_strides,
    member_data_offset,
    read_npy_header,
    tensor_info,
    to_tensor,
)


class NpzSource(SourceBase):
    """A .npz archive; names are the member names without `.npy`, in archive order."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        try:
            self._file = open(path, "rb")  # noqa: SIM115 - kept open until close()
            self._zip = zipfile.ZipFile(self._file)
        except (OSError, zipfile.BadZipFile) as err:
            if hasattr(self, "_file"):
                self._file.close()
            raise CheckpointError(f"{self.path}: not a readable .npz archive: {err}") from None
        self._members: dict[str, tuple[zipfile.ZipInfo, NpyHeader]] = {}
        self._infos = {}
        try:
            for member in self._zip.infolist():
                if member.filename.endswith(".npy"):
                    self._add(member)
        except BaseException:
            self.close()
            raise

    def load(self, name: str) -> Array:
        """The tensor `name`: a view into the archive when stored uncompressed."""
        info = self.info(name)
        member, header = self._members[name]
        where = f"{self.path}[{member.filename}]"
        fd = self._fileno(self._file)
        offset = member_data_offset(fd, member, where)
        if offset is None:
            with self._zip.open(member) as fp:
                stored = npy.read_array(fp, allow_pickle=False)
        else:
            strides = fortran_strides(header.shape) if header.fortran else None
            start = offset + header.length
            stored = map_array(fd, start, header.stored, header.shape, strides, path=where)
        return to_tensor(stored, info)

    def close(self) -> None:
        """Close the archive; arrays already returned stay valid."""
        self._zip.close()
        self._file.close()

    def _add(self, member: zipfile.ZipInfo) -> None:
        name = member.filename[: -len(".npy")]
        where = f"{self.path}[{member.filename}]"
        tag = None
        if member.comment.startswith(COMMENT_PREFIX):
            tag = member.comment[len(COMMENT_PREFIX) :].decode("ascii", "replace")
        try:
            with self._zip.open(member) as fp:
                header = read_npy_header(fp, where)
        except (OSError, zipfile.BadZipFile, RuntimeError) as err:
            raise CheckpointError(f"{where}: cannot read the member: {err}") from None
        self._infos[name] = tensor_info(name, header, tag, where)
        self._members[name] = (member, header)


class NpyFolderSource(SourceBase):
    """A folder of .npy files (searched recursively); a name is the relative path minus `.npy`."""

    def __init__(self, path: str | os.PathLike[str], allow_outside_links: bool = False) -> None:
        self.path = str(path)
        self.allow_outside_links = allow_outside_links
        folder = Path(path)
        if not folder.is_dir():
            raise CheckpointError(f"{self.path}: not a folder")
        tags = _read_tags(folder / DTYPES_FILE)
        self._files: dict[str, Path] = {}
        self._infos = {}
        for file in sorted(folder.rglob("*.npy")):
            name = file.relative_to(folder).as_posix()[: -len(".npy")]
            try:
                with open(file, "rb") as fp:
                    header = read_npy_header(fp, str(file))
            except OSError as err:
                raise CheckpointError(f"{file}: cannot read: {err.strerror}") from None
            self._infos[name] = tensor_info(name, header, tags.get(name), str(file))
            self._files[name] = file

    def load(self, name: str) -> Array:
        """The tensor `name`, memory-mapped from its file."""
        info = self.info(name)
        file = self._files[name]
        try:
            stored = np.asarray(np.load(file, mmap_mode="r", allow_pickle=False))
        except (OSError, ValueError) as err:
            raise CheckpointError(f"{file}: cannot load: {err}") from None
        if stored.shape != info.shape:
            raise CheckpointError(f"{file}: changed since it was listed")
        return to_tensor(stored, info)


def _read_tags(path: Path) -> dict[str, str]:
    """The folder's dtype tags (name -> dtype name), or none if it has no tag file."""
    if not path.exists():
        return {}
    try:
        tags = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: cannot read the dtype tags: {err}") from None
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise CheckpointError(f"{path}: expected a JSON object of tensor name -> dtype")
    return tags
