"""A stored (uncompressed) zip archive laid out in advance: every member at a fixed offset.

An .npz whose member sizes are known before any data exists can be written like a safetensors
file: each member's bytes at their place, in any order, its CRC filled in once it is complete,
the central directory last. Always zip64, so any size fits. Imports only the standard library.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

EPOCH = (1980, 1, 1, 0, 0, 0)
"""Fixed member timestamps keep archives reproducible."""
CRC_OFFSET = 14
"""Where a local file header holds its member's CRC-32."""
_VERSION = 45  # zip64
_MADE_BY = (3 << 8) | _VERSION  # Unix
_MODE = 0o644 << 16
_UTF8 = 0x800
_FULL32 = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Member:
    """One stored member: its name, comment, where its local header starts, its size."""

    name: str
    comment: bytes
    header_at: int
    size: int

    @property
    def flags(self) -> int:
        """UTF-8 names are flagged, as zip readers expect."""
        return 0 if self.name.isascii() else _UTF8

    @property
    def data_at(self) -> int:
        """Where the member's bytes start."""
        return self.header_at + len(self.local_header(0))

    @property
    def end(self) -> int:
        """Just past the member's bytes."""
        return self.data_at + self.size

    def local_header(self, crc: int) -> bytes:
        """The local file header (zip64 sizes) with the member's CRC-32."""
        info = zipfile.ZipInfo(self.name, date_time=EPOCH)
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = info.compress_size = self.size
        info.CRC = crc
        return info.FileHeader(zip64=True)

    def central_entry(self, crc: int) -> bytes:
        """The member's central directory entry (zip64 sizes and offset)."""
        name = self.name.encode("utf-8")
        extra = struct.pack("<HHQQQ", 1, 24, self.size, self.size, self.header_at)
        fixed = struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            _MADE_BY,
            _VERSION,
            self.flags,
            zipfile.ZIP_STORED,
            0,  # time 00:00:00
            (1 << 5) | 1,  # date 1980-01-01
            crc,
            _FULL32,
            _FULL32,
            len(name),
            len(extra),
            len(self.comment),
            0,
            0,
            _MODE,
            _FULL32,
        )
        return fixed + name + extra + self.comment


def lay_out_members(entries: Sequence[tuple[str, bytes, int]]) -> list[Member]:
    """Members `(name, comment, size)` placed one after another from offset 0."""
    members: list[Member] = []
    cursor = 0
    for name, comment, size in entries:
        member = Member(name, comment, cursor, size)
        members.append(member)
        cursor = member.end
    return members


def central_directory(members: Sequence[Member], crcs: Sequence[int], at: int) -> bytes:
    """The central directory, zip64 end records and end record of an archive whose directory
    starts at byte `at`."""
    entries = b"".join(m.central_entry(crc) for m, crc in zip(members, crcs, strict=True))
    count, size = len(members), len(entries)
    end64 = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, _MADE_BY, _VERSION, 0, 0, count, count, size, at
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, at + size, 1)
    short = min(count, 0xFFFF)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, short, short, min(size, _FULL32), _FULL32, 0)
    return entries + end64 + locator + end
