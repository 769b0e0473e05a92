"""Where every output goes in an npz, .npy folder or GGUF output, known before any data.

Each format is laid out like a safetensors file: every tensor has a fixed place (a slot) in a
file of fixed size, so tensors can be written in any order, each one journaled, and a resume
finds them where it left them. An npz is a stored zip in the declared order (see
`io.zip_layout`), a folder one `.npy` per tensor, GGUF one file per part. Imports `io`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyparams.io import TensorInfo, plan_gguf_parts
from lazyparams.io.dtypes import EXTENSION_DTYPES
from lazyparams.io.gguf_format import lay_out_gguf
from lazyparams.io.gguf_metadata import GGUFMetadata
from lazyparams.io.npy_format import COMMENT_PREFIX, DTYPES_FILE, npy_header
from lazyparams.io.zip_layout import Member, central_directory, lay_out_members

FOLDER = Path(".")
"""The published path of a layout whose whole data folder is renamed into place."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One tensor's place: its file, its own header (npz local header + npy header, or npy
    header) at `head_at`, its bytes at `data_at` up to `end`; its CRC covers `crc_from`..`end`."""

    file: int
    head_at: int
    head: bytes
    data_at: int
    end: int
    crc_from: int
    member: int = -1
    """The slot's index among an npz's members (-1 in other formats)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """The files of an output (relative to the data folder), their sizes and fixed first
    bytes, each tensor's slot, and what is renamed where to publish it."""

    files: tuple[Path, ...]
    sizes: tuple[int, ...]
    prefixes: tuple[bytes, ...]
    slots: dict[str, Slot]
    published: tuple[tuple[Path, Path], ...]
    members: tuple[Member, ...] = ()
    numpy: bool = False
    """Whether dtypes numpy cannot spell are stored as raw bits (npz and .npy)."""

    def head(self, name: str, crc: int) -> bytes:
        """The slot's header bytes once the tensor is complete (an npz member's has its CRC)."""
        slot = self.slots[name]
        if not self.members:
            return slot.head
        member = self.members[slot.member]
        return member.local_header(crc) + slot.head[member.data_at - member.header_at :]

    def trailer(self, crcs: Mapping[str, int]) -> bytes:
        """What follows the last slot once every tensor is there: an npz's central directory."""
        if not self.members:
            return b""
        return central_directory(self.members, [crcs[n] for n in self.slots], self.sizes[0])

    def create(self, data: Path) -> None:
        """Make the files in `data` (empty but for their fixed first bytes, at full size)."""
        for relative, size, prefix in zip(self.files, self.sizes, self.prefixes, strict=True):
            path = data / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.pwrite(fd, prefix, 0)
                os.ftruncate(fd, max(size, len(prefix)))
            finally:
                os.close(fd)


def plan_layout(
    dst: Path,
    format: str,
    infos: Sequence[TensorInfo],
    *,
    shard_size: int | None,
    metadata: Any,
    scratch: Path,
) -> Layout:
    """The layout of `infos` written as `format` at `dst`; a GGUF header is written into
    `scratch` (a folder made and removed here) to learn its bytes."""
    if format == "npz":
        return _npz(dst, infos)
    if format == "npy":
        return _npy(dst, infos)
    return _gguf(dst, infos, shard_size, metadata, scratch)


def _comment(info: TensorInfo) -> bytes:
    """The member comment that tags a dtype numpy cannot spell (see npy_format)."""
    return COMMENT_PREFIX + info.dtype.encode("ascii") if info.dtype in EXTENSION_DTYPES else b""


def _npz(dst: Path, infos: Sequence[TensorInfo]) -> Layout:
    headers = [npy_header(info) for info in infos]
    members = lay_out_members(
        [
            (f"{i.name}.npy", _comment(i), len(h) + i.nbytes)
            for i, h in zip(infos, headers, strict=True)
        ]
    )
    slots = {
        info.name: Slot(
            0, m.header_at, m.local_header(0) + h, m.data_at + len(h), m.end, m.data_at, index
        )
        for index, (info, m, h) in enumerate(zip(infos, members, headers, strict=True))
    }
    size = members[-1].end if members else 0
    return Layout(
        (Path(dst.name),),
        (size,),
        (b"",),
        slots,
        ((Path(dst.name), dst),),
        tuple(members),
        numpy=True,
    )


def _npy(dst: Path, infos: Sequence[TensorInfo]) -> Layout:
    files, sizes, prefixes, slots = [], [], [], {}
    for index, info in enumerate(infos):
        header = npy_header(info)
        files.append(Path(f"{info.name}.npy"))
        sizes.append(len(header) + info.nbytes)
        prefixes.append(b"")
        slots[info.name] = Slot(index, 0, header, len(header), sizes[-1], 0)
    tags = {info.name: info.dtype for info in infos if info.dtype in EXTENSION_DTYPES}
    if tags:
        text = json.dumps(tags, indent=1, sort_keys=True) + "\n"
        files.append(Path(DTYPES_FILE))
        prefixes.append(text.encode("utf-8"))
        sizes.append(len(prefixes[-1]))
    return Layout(tuple(files), tuple(sizes), tuple(prefixes), slots, ((FOLDER, dst),), numpy=True)


def _gguf(
    dst: Path,
    infos: Sequence[TensorInfo],
    shard_size: int | None,
    metadata: GGUFMetadata,
    scratch: Path,
) -> Layout:
    files, sizes, prefixes, slots = [], [], [], {}
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        for index, part in enumerate(plan_gguf_parts(dst, infos, shard_size, metadata)):
            offsets, size = lay_out_gguf(
                scratch / part.path.name, part.infos, metadata=part.metadata
            )
            first = min(offsets.values(), default=size)
            with open(scratch / part.path.name, "rb") as fp:
                prefixes.append(fp.read(first))
            files.append(Path(part.path.name))
            sizes.append(size)
            for info in part.infos:
                at = offsets[info.name]
                slots[info.name] = Slot(index, at, b"", at, at + info.nbytes, at)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    published = tuple((Path(f.name), dst.with_name(f.name)) for f in files)
    return Layout(tuple(files), tuple(sizes), tuple(prefixes), slots, published)
