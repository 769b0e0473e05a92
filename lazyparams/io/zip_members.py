"""Zip archives read with bounds: members checked once at open, inflated in bounded chunks.

`ZipMembers` refuses duplicate, NUL or unsafe names, encryption, methods but stored and deflate,
sizes deflate cannot produce, and members overlapping or running past the file. `read_into`
streams a byte range of a member into the caller's buffer, checking size and CRC-32 when a read
reaches its end. Imports the standard library, io.limits and io.reasons.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import zipfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import IO

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import check_name
from lazyparams.io.reasons import zip_directory_reason, zip_version

CHUNK_BYTES = 64 * 1024
"""Inflated bytes produced per step of a streamed read."""
INPUT_BYTES = 16 * 1024
"""Compressed bytes read from the file per step."""
CACHED_STREAMS = 4
"""Streams kept open between reads, so that blocks of rows read in order inflate once."""
INFLATE_BUFFER_BYTES = 512 * 1024
"""What streamed reads hold beside their output at most: a step's chunk, its input, zlib's
window and state, the streams kept between reads and a reader's scratch of `CHUNK_BYTES`.
The memory plan counts it."""
MAX_DEFLATE_RATIO = 1032
"""Deflate expands its input at most about 1032 times; a member declaring more is corrupt."""

_LOCAL = struct.Struct("<4sHHH4xIIIHH")  # signature, version, flags, method, ..., name, extra
_LOCAL_SIGNATURE = b"PK\x03\x04"
_EMPTY_SIGNATURE = b"PK\x05\x06"  # an archive without members is its end record alone
_ENCRYPTED = 0x1 | 0x40  # traditional and strong encryption
_PATCHED = 0x20  # PKWARE's patch data: a delta against a file the reader would need
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}


@dataclass(frozen=True, slots=True)
class Member:
    """One member: its name, method, sizes (inflated and stored), CRC-32 and where it lies."""

    name: str
    method: int
    size: int
    packed: int
    crc: int
    header: int
    start: int
    comment: bytes = b""

    @property
    def compressed(self) -> bool:
        """Whether the member is deflated (else its bytes lie in the file as they are)."""
        return self.method == zipfile.ZIP_DEFLATED

    @property
    def end(self) -> int:
        """File offset just past the member's stored bytes."""
        return self.start + self.packed


class ZipMembers:
    """The members of a zip archive open in `file`, checked, and reads of them with bounds."""

    def __init__(self, file: IO[bytes], path: str, what: str = "zip archive") -> None:
        self.path = path
        self._fd = file.fileno()
        _check_start(self._fd, path, what)
        infos, directory = _central_directory(file, path, what)
        self.members: dict[str, Member] = {}
        for info in infos:
            member = self._member(info, min(directory, os.fstat(self._fd).st_size))
            if member.name in self.members:
                raise CheckpointError(
                    f"{path}: member {member.name!r} appears twice; expected unique members"
                )
            self.members[member.name] = member
        _check_no_overlap(list(self.members.values()), path)
        self._streams: OrderedDict[str, _Inflater] = OrderedDict()
        self._lock = threading.Lock()

    def where(self, member: Member) -> str:
        """How messages name `member`: the archive's path and the member's name."""
        return f"{self.path}[{member.name}]"

    def read(self, member: Member, limit: int, what: str) -> bytes:
        """The whole of a small member (at most `limit` bytes), its size and CRC-32 checked."""
        if member.size > limit:
            raise CheckpointError(
                f"{self.where(member)}: {what} of {member.size} bytes; expected at most {limit}"
            )
        buffer = bytearray(member.size)
        self.read_into(member, 0, memoryview(buffer))
        if not member.compressed:
            _check_crc(zlib.crc32(buffer), member, self.where(member))
        return bytes(buffer)

    def check_stored(self, member: Member) -> None:
        """Refuse a stored member whose bytes do not have its declared CRC-32, read through in
        bounded chunks (a stored member is otherwise mapped, and its CRC never computed)."""
        crc, chunk = 0, bytearray(min(CHUNK_BYTES, max(member.size, 1)))
        for at in range(0, member.size, len(chunk)):
            view = memoryview(chunk)[: min(len(chunk), member.size - at)]
            _pread_into(self._fd, member.start + at, view, self.where(member))
            crc = zlib.crc32(view, crc)
        _check_crc(crc, member, self.where(member))

    def read_into(self, member: Member, start: int, out: memoryview) -> None:
        """Fill `out` with bytes [start, start + len(out)) of `member`, streaming."""
        stop = start + out.nbytes
        if not 0 <= start <= stop <= member.size:
            raise CheckpointError(
                f"{self.where(member)}: bytes [{start}, {stop}) lie outside the member's "
                f"{member.size} bytes"
            )
        if not member.compressed:
            _pread_into(self._fd, member.start + start, out, self.where(member))
            return
        stream = self._stream(member, start)
        stream.skip(start - stream.position)
        stream.produce(out)
        if stream.position == member.size:
            stream.finish()
        else:
            self._keep(stream)

    def _stream(self, member: Member, start: int) -> _Inflater:
        """A stream of `member` at or before `start`: a kept one, else a new one."""
        with self._lock:
            stream = self._streams.pop(member.name, None)
        if stream is None or stream.position > start:
            stream = _Inflater(self._fd, member, self.where(member))
        return stream

    def _keep(self, stream: _Inflater) -> None:
        """Keep `stream` for the next read of its member, dropping the oldest kept past
        `CACHED_STREAMS`."""
        with self._lock:
            self._streams[stream.member.name] = stream
            while len(self._streams) > CACHED_STREAMS:
                self._streams.popitem(last=False)

    def _member(self, info: zipfile.ZipInfo, limit: int) -> Member:
        """`info` checked and located: its local header read, its bytes inside `limit`."""
        where = f"{self.path}[{info.filename}]"
        name = _member_name(info, where)
        if info.flag_bits & _ENCRYPTED:
            raise CheckpointError(f"{where}: the member is encrypted; expected a plain one")
        if info.flag_bits & _PATCHED:
            raise CheckpointError(
                f"{where}: the member is compressed patched data (flag bit 5), which zip readers "
                "do not read; expected plain stored or deflated data"
            )
        method = _METHODS.get(info.compress_type)
        if method is None:
            raise CheckpointError(
                f"{where}: compression method {info.compress_type}; expected stored or deflate"
            )
        _check_sizes(info, where)
        start = self._data_start(info, where)
        member = Member(
            name, info.compress_type, info.file_size, info.compress_size, info.CRC,
            info.header_offset, start, info.comment,
        )  # fmt: skip
        if member.end > limit:
            raise CheckpointError(
                f"{where}: the member's {member.packed} bytes at {start} run past the archive's "
                f"data, which ends at {limit}; the file is truncated or corrupt"
            )
        return member

    def _data_start(self, info: zipfile.ZipInfo, where: str) -> int:
        """File offset of the member's bytes, after its local header (checked against the
        central directory's entry)."""
        raw = (
            os.pread(self._fd, _LOCAL.size, info.header_offset) if info.header_offset >= 0 else b""
        )
        if len(raw) != _LOCAL.size or not raw.startswith(_LOCAL_SIGNATURE):
            raise CheckpointError(
                f"{where}: no local header at offset {info.header_offset}; the archive is corrupt"
            )
        _sig, _version, _flags, method, _crc, _packed, _size, name_len, extra_len = _LOCAL.unpack(
            raw
        )
        encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
        name = os.pread(self._fd, name_len, info.header_offset + _LOCAL.size)
        if method != info.compress_type or name != info.orig_filename.encode(encoding):
            raise CheckpointError(
                f"{where}: the local header disagrees with the central directory "
                "(name or method); the archive is corrupt"
            )
        return int(info.header_offset + _LOCAL.size + name_len + extra_len)


class _Inflater:
    """One member's deflate stream, `position` inflated bytes in, with a running CRC-32."""

    def __init__(self, fd: int, member: Member, where: str) -> None:
        self._fd, self.member, self._where = fd, member, where
        self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        self._next = member.start
        self._pending = b""
        self.position = 0
        self._crc = 0

    def skip(self, count: int) -> None:
        """Inflate and drop the next `count` bytes."""
        while count > 0:
            count -= len(self._step(count))

    def produce(self, out: memoryview) -> None:
        """Fill `out` with the next inflated bytes."""
        filled = 0
        while filled < out.nbytes:
            data = self._step(out.nbytes - filled)
            out[filled : filled + len(data)] = data
            filled += len(data)

    def finish(self) -> None:
        """Check, once all declared bytes are out, that the stream ends there and its CRC."""
        while not self._zlib.eof:
            more = self._more_input()
            if self._inflate(1):
                raise CheckpointError(
                    f"{self._where}: inflates to more than its declared {self.member.size} bytes"
                )
            if not more:
                raise CheckpointError(f"{self._where}: the deflate stream is truncated")
        _check_crc(self._crc, self.member, self._where)

    def _step(self, want: int) -> bytes:
        """The next inflated bytes (at most `want` and `CHUNK_BYTES`, at least one)."""
        while not self._zlib.eof:
            more = self._more_input()
            data = self._inflate(min(want, CHUNK_BYTES))
            if data:
                self.position += len(data)
                self._crc = zlib.crc32(data, self._crc)
                return data
            if not more:
                break
        raise CheckpointError(
            f"{self._where}: the deflate stream ends after {self.position} bytes; expected "
            f"{self.member.size} (truncated or corrupt)"
        )

    def _inflate(self, limit: int) -> bytes:
        """Up to `limit` bytes inflated from the pending input (which may be empty: zlib can
        hold output of input already taken)."""
        try:
            data = self._zlib.decompress(self._pending, limit)
        except zlib.error:
            first = self._next - len(self._pending)
            raise CheckpointError(
                f"{self._where}: corrupt deflate data between bytes {first} and {self._next} of "
                f"the file, after {self.position} bytes inflated"
            ) from None
        self._pending = self._zlib.unconsumed_tail
        return data

    def _more_input(self) -> bool:
        """Whether compressed bytes are pending, reading the next ones from the file."""
        if not self._pending and self._next < self.member.end:
            count = min(INPUT_BYTES, self.member.end - self._next)
            self._pending = os.pread(self._fd, count, self._next)
            if len(self._pending) != count:
                raise CheckpointError(f"{self._where}: the file ends inside the member")
            self._next += count
        return bool(self._pending)


def _check_start(fd: int, path: str, what: str) -> None:
    """Refuse bytes before the first member (zipfile skips them; numpy and torch do not read
    such a file): an archive starts with a member, or with the end record when empty."""
    head = os.pread(fd, 4, 0)
    if head not in (_LOCAL_SIGNATURE, _EMPTY_SIGNATURE):
        raise CheckpointError(
            f"{path}: not a readable {what}: byte 0 holds {head.hex() or 'nothing'}; expected "
            f"a zip member's signature {_LOCAL_SIGNATURE.hex()} (no data before the first member)"
        )


def _central_directory(file: IO[bytes], path: str, what: str) -> tuple[list[zipfile.ZipInfo], int]:
    """The archive's entries and the central directory's offset, as zipfile parses them."""
    try:
        with zipfile.ZipFile(file) as archive:
            directory = getattr(archive, "start_dir", None)
            return archive.infolist(), int(directory) if directory is not None else 2**63
    except NotImplementedError as err:  # a version needed to extract over 6.3
        raise CheckpointError(
            f"{path}: {zip_version(err)} is needed to extract; expected at most zip version 6.3"
        ) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError) as err:
        raise CheckpointError(
            f"{path}: not a readable {what}: {zip_directory_reason(err)}"
        ) from None
    except (ValueError, struct.error, UnicodeDecodeError, OverflowError) as err:
        reason = zip_directory_reason(err)
        raise CheckpointError(f"{path}: corrupt zip central directory: {reason}") from None


def _member_name(info: zipfile.ZipInfo, where: str) -> str:
    """The member's name, refused if it holds a NUL or is not a safe relative path."""
    if "\x00" in info.orig_filename:
        raise CheckpointError(f"{where}: member name {info.orig_filename!r} contains a NUL")
    name = check_name(info.filename, where)
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts[:-1]):
        raise CheckpointError(
            f"{where}: member name {name!r} is not a safe relative path; expected names like "
            "'folder/name' without '..', '.', '\\' or a leading '/'"
        )
    return name


def _check_sizes(info: zipfile.ZipInfo, where: str) -> None:
    """Refuse sizes a stored member cannot have or deflate cannot produce."""
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        raise CheckpointError(
            f"{where}: stored member of {info.compress_size} bytes declares {info.file_size}; "
            "expected them equal"
        )
    if info.file_size > MAX_DEFLATE_RATIO * info.compress_size + 1024:
        raise CheckpointError(
            f"{where}: {info.compress_size} compressed bytes declare {info.file_size} inflated, "
            f"more than deflate can produce (at most {MAX_DEFLATE_RATIO} times)"
        )


def _check_no_overlap(members: list[Member], path: str) -> None:
    """Refuse members whose headers and bytes share any part of the file."""
    ordered = sorted(members, key=lambda m: m.header)
    for first, second in itertools.pairwise(ordered):
        if first.end > second.header:
            raise CheckpointError(
                f"{path}: members {first.name!r} and {second.name!r} overlap (bytes up to "
                f"{first.end} and a header at {second.header}); expected disjoint members"
            )


def _check_crc(crc: int, member: Member, where: str) -> None:
    """Refuse a member whose bytes do not have the CRC-32 its entry declares."""
    if crc != member.crc:
        raise CheckpointError(
            f"{where}: CRC-32 {crc:08x} does not match the declared {member.crc:08x}; "
            "the member is corrupt"
        )


def _pread_into(fd: int, offset: int, out: memoryview, where: str) -> None:
    """Fill `out` from byte `offset` of `fd`, refusing a short read (a truncated file)."""
    filled = 0
    while filled < out.nbytes:
        count = os.preadv(fd, [out[filled:]], offset + filled)
        if count == 0:
            raise CheckpointError(f"{where}: the file ends inside the member")
        filled += count
