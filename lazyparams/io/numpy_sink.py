"""Writing .npz archives and folders of .npy files, readable by plain `np.load`.

An npz member is appended the moment its tensor arrives (archive order is arrival order); a
folder gets one file per tensor. Tensors whose dtype numpy cannot spell are written as raw bits
and tagged (see npy_format). Imports numpy and the io layer only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import IO

import numpy.lib.format as npy

from lazyparams.errors import CheckpointError
from lazyparams.io.base import Array, SinkBase, TensorInfo
from lazyparams.io.dtypes import EXTENSION_DTYPES, is_block
from lazyparams.io.filemap import write_array_at
from lazyparams.io.npy_format import DTYPES_FILE, dtype_comment, npy_header, stored_form
from lazyparams.io.output_names import check_file_names, check_member_names
from lazyparams.io.partial import flat_info, rows_offset
from lazyparams.io.staging import Staging

_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps keep archives reproducible
_COPY_BYTES = 16 * 1024 * 1024


def refuse_block_types(path: str | os.PathLike[str], infos: Sequence[TensorInfo]) -> None:
    """Refuse GGML block types: .npy has no way to say a uint8 array is rows of blocks."""
    for info in infos:
        if is_block(info.dtype):
            raise CheckpointError(
                f"{path}: tensor {info.name!r}: .npy has no dtype for {info.dtype}; expected "
                "an element dtype (GGML block types are written to .gguf)"
            )


class NpzSink(SinkBase):
    """An .npz archive written member by member into a temporary, renamed on `finalize`.

    A tensor written in row blocks is staged in an unnamed file beside the archive until its
    last rows arrive, then copied into its member.
    """

    def __init__(
        self, path: str | os.PathLike[str], infos: Sequence[TensorInfo], *, compress: bool = False
    ) -> None:
        refuse_block_types(path, infos)
        check_member_names(str(path), [info.name for info in infos])
        super().__init__(str(path), infos)
        self._staging = Staging()
        self._method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        self._zip_lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._zip: zipfile.ZipFile | None = None
        self._staged: dict[str, IO[bytes]] = {}
        try:
            self._file = open(self._staging.new_file(Path(path)), "wb")  # noqa: SIM115
            self._zip = zipfile.ZipFile(self._file, "w", allowZip64=True)
        except BaseException:
            self.abort()
            raise

    def _member(self, name: str) -> zipfile.ZipInfo:
        member = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
        member.compress_type = self._method
        member.comment = dtype_comment(self.infos[name].dtype)
        return member

    def _store(self, name: str, array: Array) -> None:
        assert self._zip is not None
        with self._zip_lock, self._zip.open(self._member(name), "w", force_zip64=True) as fp:
            npy.write_array(fp, stored_form(array, self.infos[name].dtype), allow_pickle=False)

    def _store_rows(self, name: str, start: int, block: Array) -> None:
        info = self.infos[name]
        with self._zip_lock:
            if name not in self._staged:
                folder = Path(self.path).parent
                self._staged[name] = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115
            fd = self._staged[name].fileno()
        write_array_at(fd, stored_form(block, info.dtype), rows_offset(flat_info(info), start))

    def _finish_rows(self, name: str) -> None:
        assert self._zip is not None
        staged = self._staged.pop(name)
        fd, size = staged.fileno(), self.infos[name].nbytes
        member = self._member(name)
        with staged, self._zip_lock, self._zip.open(member, "w", force_zip64=True) as fp:
            fp.write(npy_header(self.infos[name]))
            for offset in range(0, size, _COPY_BYTES):
                fp.write(os.pread(fd, min(_COPY_BYTES, size - offset), offset))

    def _commit(self) -> None:
        assert self._zip is not None and self._file is not None
        self._zip.close()
        self._file.close()
        self._staging.commit()

    def _discard(self) -> None:
        if self._zip is not None:
            with contextlib.suppress(ValueError, OSError):  # a member may still be open
                self._zip.close()
        if self._file is not None:
            self._file.close()
        for staged in self._staged.values():
            staged.close()
        self._staged.clear()
        self._staging.discard()


class NpyFolderSink(SinkBase):
    """A folder with one `name.npy` per tensor (a `/` in a name makes a subfolder)."""

    def __init__(self, path: str | os.PathLike[str], infos: Sequence[TensorInfo]) -> None:
        folder = Path(path)
        if folder.exists() and not folder.is_dir():
            raise CheckpointError(
                f"{folder}: exists and is not a folder; expected a folder or nothing"
            )
        refuse_block_types(path, infos)
        check_file_names(str(path), [info.name for info in infos])
        super().__init__(str(path), infos)
        self._staging = Staging()
        self._temps: dict[str, Path] = {}
        try:
            for info in infos:
                final = folder / f"{_relative_name(info.name, self.path)}.npy"
                self._temps[info.name] = self._staging.new_file(final)
            self._write_tags(folder, infos)
        except BaseException:
            self.abort()
            raise

    def _write_tags(self, folder: Path, infos: Sequence[TensorInfo]) -> None:
        tags = {info.name: info.dtype for info in infos if info.dtype in EXTENSION_DTYPES}
        if tags:
            temp = self._staging.new_file(folder / DTYPES_FILE)
            temp.write_text(json.dumps(tags, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    def _store(self, name: str, array: Array) -> None:
        with open(self._temps[name], "wb") as fp:
            npy.write_array(fp, stored_form(array, self.infos[name].dtype), allow_pickle=False)

    def _store_rows(self, name: str, start: int, block: Array) -> None:
        info = self.infos[name]
        header = npy_header(info)
        fd = os.open(self._temps[name], os.O_WRONLY)
        try:
            os.pwrite(fd, header, 0)  # every block writes the same header: arrival order is free
            at = len(header) + rows_offset(flat_info(info), start)
            write_array_at(fd, stored_form(block, info.dtype), at)
        finally:
            os.close(fd)

    def _commit(self) -> None:
        self._staging.commit()

    def _discard(self) -> None:
        self._staging.discard()


def _relative_name(name: str, path: str) -> str:
    """`name` checked to be a relative path that stays inside the folder."""
    parts = PurePosixPath(name).parts
    plain = name and not name.startswith("/") and PurePosixPath(name).as_posix() == name
    if not plain or any(part in (".", "..") for part in parts):
        raise CheckpointError(
            f"{path}: tensor name {name!r} cannot be a file name; expected a relative path "
            "without '.' or '..' parts"
        )
    return name
