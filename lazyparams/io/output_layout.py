"""Where every output goes in a staged output, known before any data: a `Layout`.

A format's `lay_out` (see `output_formats`) gives every tensor a fixed place (a slot) in a file
of fixed size, so tensors can be written in any order, each one journaled, and a resume finds
them where it left them. `stored_zip` lays out a stored zip archive (npz, torch), members in
the declared order after any fixed ones. Imports the io layer's zip layout only.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    """A zip's members, fixed ones (written with the prefix) first."""
    fixed_crcs: tuple[int, ...] = ()
    """The CRCs of the fixed members, which come first."""
    numpy: bool = False
    """Whether dtypes numpy cannot spell are stored as raw bits (npz and .npy)."""
    _by_member: dict[int, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_member.update((slot.member, name) for name, slot in self.slots.items())

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
        fixed = len(self.fixed_crcs)
        ordered = [*self.fixed_crcs]
        ordered += [crcs[self._by_member[i]] for i in range(fixed, len(self.members))]
        return central_directory(self.members, ordered, self.sizes[0])

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


def stored_zip(
    dst: Path,
    fixed: Sequence[tuple[str, bytes]],
    tensors: Sequence[tuple[str, str, bytes, bytes, int]],
    *,
    numpy: bool = False,
) -> Layout:
    """A stored zip archive published as DST: the `fixed` members `(member name, content)`
    first, written with the file's first bytes, then one member per tensor, `(tensor name,
    member name, comment, head, nbytes)`, holding `head` (an npy header, or nothing) and the
    tensor's bytes."""
    entries = [(name, b"", len(content)) for name, content in fixed]
    entries += [(member, comment, len(head) + size) for _, member, comment, head, size in tensors]
    members = lay_out_members(entries)
    crcs = tuple(zlib.crc32(content) for _, content in fixed)
    prefix = b"".join(
        m.local_header(crc) + content
        for m, crc, (_, content) in zip(members, crcs, fixed, strict=False)
    )
    slots = {}
    for index, (name, _, _, head, _) in enumerate(tensors, start=len(fixed)):
        m = members[index]
        slots[name] = Slot(
            0, m.header_at, m.local_header(0) + head, m.data_at + len(head), m.end, m.data_at, index
        )
    size = members[-1].end if members else 0
    return Layout(
        (Path(dst.name),),
        (size,),
        (prefix,),
        slots,
        ((Path(dst.name), dst),),
        tuple(members),
        crcs,
        numpy=numpy,
    )
