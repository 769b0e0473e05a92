"""A bounded reading position in an untrusted GGUF header: every read checked against the file.

Each read first checks that the bytes it needs are left in the file, so nothing is allocated
from a length the file does not back; each failure is a CheckpointError naming the file, what
was being read (a key or a tensor), the byte offset and what was expected. Imports numpy and
the error types only.
"""

from __future__ import annotations

import struct
from typing import Any, NoReturn

import numpy as np

from lazyparams.errors import CheckpointError

UNREADABLE = "not a readable GGUF file"
"""The words every header error starts with, after the file's path."""
_CODES = "BbHhIiQqfd"


class Cursor:
    """A position in the bytes of one file (a map or a bytes object), read in `order`
    ("<" little-endian, ">" big-endian); `path` starts every error. `inner_arrays` counts
    the arrays read inside arrays so far, which the value reader bounds per file."""

    def __init__(self, data: Any, path: str, order: str = "<") -> None:
        self.data = data
        self.path = path
        self.pos = 0
        self.size = len(data)
        self.inner_arrays = 0
        self.set_order(order)

    def set_order(self, order: str) -> None:
        """Read in byte order `order` from now on (struct formats compiled once per order)."""
        self.order = order
        self._structs: dict[str, struct.Struct] = {c: struct.Struct(order + c) for c in _CODES}

    def left(self) -> int:
        """Bytes between the position and the end of the file."""
        return self.size - self.pos

    def fail(self, where: str, message: str, at: int | None = None) -> NoReturn:
        """Raise the CheckpointError for `where` (what was read) at byte `at` (default: here)."""
        offset = self.pos if at is None else at
        raise CheckpointError(f"{self.path}: {UNREADABLE}: {where} at byte {offset}: {message}")

    def need(self, nbytes: int, where: str, what: str, at: int | None = None) -> None:
        """Refuse unless `nbytes` bytes are left for `what`."""
        if nbytes > self.size - self.pos:
            self.fail(
                where,
                f"{what} needs {nbytes} bytes but {self.left()} are left in the file; expected "
                "it to fit the file (a truncated or corrupt header?)",
                at,
            )

    def unpack(self, code: str, where: str, what: str) -> Any:
        """One value of the one-letter struct format `code` (in the file's byte order)."""
        packer = self._structs[code]
        start = self.pos
        if packer.size > self.size - start:
            self.need(packer.size, where, what)
        self.pos = start + packer.size
        return packer.unpack_from(self.data, start)[0]

    def unpack_many(self, fmt: str, where: str, what: str) -> tuple[Any, ...]:
        """The values of the struct format `fmt` (several fields read at once), each format
        compiled once."""
        packer = self._structs.get(fmt)
        if packer is None:
            packer = self._structs[fmt] = struct.Struct(self.order + fmt)
        self.need(packer.size, where, what)
        start = self.pos
        self.pos += packer.size
        return packer.unpack_from(self.data, start)

    def u32(self, where: str, what: str) -> int:
        """An unsigned 32-bit integer."""
        return int(self.unpack("I", where, what))

    def u64(self, where: str, what: str) -> int:
        """An unsigned 64-bit integer."""
        return int(self.unpack("Q", where, what))

    def raw(self, nbytes: int, where: str, what: str) -> bytes:
        """The next `nbytes` bytes, copied out of the file."""
        self.need(nbytes, where, what)
        start = self.pos
        self.pos += nbytes
        return bytes(self.data[start : self.pos])

    def string(self, where: str, what: str) -> bytes:
        """A GGUF string's bytes: its u64 length, checked against the bytes left, then them."""
        at = self.pos
        if self.size - at < 8:
            self.need(8, where, f"the length of {what}")
        (length,) = self._structs["Q"].unpack_from(self.data, at)
        start = at + 8
        if length > self.size - start:
            self.pos = start
            self.need(length, where, f"{what} (a string)", at)
        self.pos = start + length
        return bytes(self.data[start : self.pos])

    def text(self, where: str, what: str) -> str:
        """A GGUF string that must be valid UTF-8 without NUL (a key or a tensor name)."""
        at = self.pos
        raw = self.string(where, what)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            self.fail(
                where,
                f"{what} {_shown(raw)} is not valid UTF-8 ({err.reason} at byte "
                f"{err.start} of it); expected UTF-8 text",
                at,
            )
        if "\x00" in text:
            self.fail(where, f"{what} {text!r} contains a NUL character; expected none", at)
        return text

    def array(self, dtype: str, count: int, where: str, what: str) -> np.ndarray[Any, Any]:
        """`count` items of the numpy scalar type `dtype` (e.g. "u4"), copied out at once."""
        kind = np.dtype(self.order + dtype)
        self.need(count * kind.itemsize, where, what)
        items = np.frombuffer(self.data, dtype=kind, count=count, offset=self.pos).copy()
        self.pos += count * kind.itemsize
        return items


def _shown(raw: bytes, limit: int = 40) -> str:
    """A repr of raw bytes cut to `limit` bytes, for messages about hostile strings."""
    return repr(raw) if len(raw) <= limit else repr(raw[:limit])[:-1] + "...'"
