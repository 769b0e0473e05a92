"""Format-blind mutations of one file's bytes, and of the fields of a zip archive's records.

Each mutation takes a `random.Random` and the bytes and returns the new bytes and a short
description for the findings report. Positions lean towards the start of a file, where every
format keeps its header.
"""

from __future__ import annotations

import random
import struct

INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x20, 0x0A, 0x22, 0x5B, 0x7B)


def extremes(width: int) -> list[int]:
    """Unsigned values of a `width`-byte field that break naive readers."""
    top = (1 << (8 * width)) - 1
    values = [0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, 0x7F, 0xFF, 0x10000]
    if width >= 4:
        values += [1 << 31, 1 << 32 if width > 4 else 0xFFFFFF, 1 << 20, 1 << 30]
    if width == 8:
        values += [1 << 63, (1 << 63) - 1, 1 << 40, 1 << 62]
    return [v & top for v in values]


def position(rng: random.Random, size: int, header: int = 256) -> int:
    """A byte position in a file of `size` bytes, in its first `header` bytes most of the time."""
    if size <= 0:
        return 0
    if rng.random() < 0.7:
        return rng.randrange(min(size, header))
    return rng.randrange(size)


def flip_bit(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at = position(rng, len(data))
    if not data:
        return data, "flip (empty)"
    bit = rng.randrange(8)
    out = bytearray(data)
    out[at] ^= 1 << bit
    return bytes(out), f"flip bit {bit} of byte {at}"


def set_byte(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    if not data:
        return data, "set byte (empty)"
    at, value = position(rng, len(data)), rng.choice(INTERESTING_BYTES)
    out = bytearray(data)
    out[at] = value
    return bytes(out), f"byte {at} = {value:#04x}"


def truncate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at = position(rng, len(data), header=64) if rng.random() < 0.5 else rng.randrange(len(data) + 1)
    return data[:at], f"truncate to {at} of {len(data)} bytes"


def insert_chunk(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at, count = position(rng, len(data)), rng.choice((1, 2, 7, 64, 4096))
    filler = rng.choice((b"\x00", b"\xff", b"A", bytes([rng.randrange(256)])))
    return data[:at] + filler * count + data[at:], f"insert {count} x {filler!r} at {at}"


def delete_range(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    at = position(rng, len(data))
    count = rng.choice((1, 4, 8, 32, 256))
    return data[:at] + data[at + count :], f"delete {count} bytes at {at}"


def duplicate_range(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    start = position(rng, len(data))
    stop = min(len(data), start + rng.choice((4, 16, 64, 512)))
    return data[:stop] + data[start:stop] + data[stop:], f"duplicate bytes {start}:{stop}"


def set_integer(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Overwrite a little-endian integer at a header position with an extreme value."""
    width = rng.choice((1, 2, 4, 8))
    if len(data) < width:
        return data, "set integer (too short)"
    at = position(rng, len(data) - width + 1)
    value = rng.choice(extremes(width))
    out = data[:at] + value.to_bytes(width, "little") + data[at + width :]
    return out, f"u{8 * width} at {at} = {value}"


def splice(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    """The start of `data` followed by the end of `other` (another valid file)."""
    cut = rng.randrange(len(data) + 1)
    cut_other = cut if rng.random() < 0.5 else rng.randrange(len(other) + 1)
    return data[:cut] + other[cut_other:], f"splice at {cut} with other file from {cut_other}"


BYTE_MUTATIONS = (flip_bit, set_byte, truncate, insert_chunk, delete_range, duplicate_range)
BYTE_MUTATIONS += (set_integer,)


# -- zip records: local headers, central directory entries and the end record ------------------

_ZIP_FIELDS = {
    b"PK\x03\x04": {"version": (4, 2), "flags": (6, 2), "method": (8, 2), "crc": (14, 4)}
    | {"csize": (18, 4), "usize": (22, 4), "name_len": (26, 2), "extra_len": (28, 2)},
    b"PK\x01\x02": {"made_by": (4, 2), "version": (6, 2), "flags": (8, 2), "method": (10, 2)}
    | {"crc": (16, 4), "csize": (20, 4), "usize": (24, 4), "name_len": (28, 2)}
    | {"extra_len": (30, 2), "comment_len": (32, 2), "disk": (34, 2), "offset": (42, 4)},
    b"PK\x05\x06": {"disk": (4, 2), "cd_disk": (6, 2), "entries_here": (8, 2)}
    | {"entries": (10, 2), "cd_size": (12, 4), "cd_offset": (16, 4), "comment_len": (20, 2)},
}


def zip_records(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, signature) of every local header, directory entry and end record in `data`."""
    found = []
    for signature in _ZIP_FIELDS:
        at = data.find(signature)
        while at >= 0:
            found.append((at, signature))
            at = data.find(signature, at + 1)
    return sorted(found)


def zip_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Set one field of one zip record to an extreme, a nearby or a random value."""
    records = zip_records(data)
    if not records:
        return flip_bit(rng, data)
    start, signature = rng.choice(records)
    field, (offset, width) = rng.choice(sorted(_ZIP_FIELDS[signature].items()))
    at = start + offset
    if at + width > len(data):
        return data[:at], f"truncate in zip field {field}"
    old = int.from_bytes(data[at : at + width], "little")
    choices = [
        *extremes(width),
        old + 1,
        old - 1,
        old * 2,
        len(data),
        rng.randrange(1 << 8 * width),
    ]
    value = rng.choice(choices) % (1 << 8 * width)
    kind = {b"PK\x03\x04": "local", b"PK\x01\x02": "central", b"PK\x05\x06": "end"}[signature]
    out = data[:at] + value.to_bytes(width, "little") + data[at + width :]
    return out, f"zip {kind} record at {start}: {field} {old} -> {value}"


def pack_u64(value: int) -> bytes:
    """`value` as an unsigned little-endian 64-bit integer (wrapped)."""
    return struct.pack("<Q", value % (1 << 64))
