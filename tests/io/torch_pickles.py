"""torch.save files built by hand, opcode by opcode, so the tests need no torch."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path


def text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def integer(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def long(value: int) -> bytes:
    """LONG1: an int of any size, as pickle writes one past 32 bits."""
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data


def opcode_of(value: int | bytes) -> bytes:
    """An int as BININT, or opcodes given as they are."""
    return value if isinstance(value, bytes) else integer(value)


def tup(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def glob(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def tensor_opcodes(
    storage: str,
    key: str,
    offset: int | bytes,
    size: tuple,
    stride: tuple,
    numel: int | None = None,
) -> bytes:
    """`_rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())`;
    the storage's `numel` defaults to what the tensor spans. Any int may be given as opcodes
    (to write values no real file holds)."""
    if numel is None:
        assert isinstance(offset, int)
        numel = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    persid = tup(text("storage"), glob("torch", storage), text(key), text("cpu"), integer(numel))
    persid += b"Q"
    hooks = glob("collections", "OrderedDict") + b")R"
    args = tup(
        persid,
        opcode_of(offset),
        tup(*map(opcode_of, size)),
        tup(*map(opcode_of, stride)),
        b"\x89",
        hooks,
    )
    return glob("torch._utils", "_rebuild_tensor_v2") + args + b"R"


def state_dict_pickle(entries: dict[str, bytes]) -> bytes:
    items = b"".join(text(name) + value for name, value in entries.items())
    return b"\x80\x02}(" + items + b"u."


def torch_zip(path: Path, pickle_bytes: bytes, storages: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle_bytes)
        archive.writestr("archive/byteorder", "little")
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)
        archive.writestr("archive/version", "3\n")
    return path
