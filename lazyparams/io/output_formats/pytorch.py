"""PyTorch output: a state dict as `torch.save` writes it (`pytorch_model.bin`, `.pt`, `.pth`).

A stored zip whose `archive/data.pkl` pickles an OrderedDict of name -> tensor, each tensor
rebuilt by `torch._utils._rebuild_tensor_v2` from its own storage `archive/data/N` (contiguous,
offset 0), so `torch.load(path, weights_only=True)` reads it, and so does our `TorchSource`.
The pickle depends on the shapes and dtypes alone, so it is written with the file's first bytes
and every storage then lands at its place. Keeps no metadata. Imports the io layer only.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

from lazyparams.errors import CheckpointError
from lazyparams.io.base import TensorInfo
from lazyparams.io.output_formats import LayoutOptions, OutputFormat
from lazyparams.io.output_layout import Layout, stored_zip
from lazyparams.io.output_names import check_text_names

ARCHIVE = "archive"
"""The folder inside the zip holding every record, as torch names it."""
STORAGES = {
    "float64": "DoubleStorage",
    "float32": "FloatStorage",
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
}
"""The typed storage class torch pickles for each dtype it loads with `weights_only`."""


def check(where: str, infos: Sequence[TensorInfo]) -> None:
    """Refuse a dtype torch has no storage class for (GGML block types, int4, float8)."""
    check_text_names(where, [info.name for info in infos])
    for info in infos:
        if info.dtype not in STORAGES:
            raise CheckpointError(
                f"{where}: tensor {info.name!r}: a PyTorch state dict has no storage for "
                f"{info.dtype}; expected one of {', '.join(STORAGES)}"
            )


def lay_out(dst: Path, infos: Sequence[TensorInfo], options: LayoutOptions) -> Layout:
    """The fixed records (data.pkl, byteorder, version), then storage `data/N` of tensor N."""
    fixed = [
        (f"{ARCHIVE}/data.pkl", state_dict_pickle(infos)),
        (f"{ARCHIVE}/byteorder", b"little"),
        (f"{ARCHIVE}/version", b"3\n"),
    ]
    tensors = [
        (info.name, f"{ARCHIVE}/data/{key}", b"", b"", info.nbytes)
        for key, info in enumerate(infos)
    ]
    return stored_zip(dst, fixed, tensors)


# The pickle, protocol 2 as torch writes it, spelled opcode by opcode: no torch needed here.
_PROTO, _STOP, _MARK, _TUPLE, _EMPTY_TUPLE = b"\x80\x02", b".", b"(", b"t", b")"
_REDUCE, _SETITEM, _BINPERSID, _NEWFALSE = b"R", b"s", b"Q", b"\x89"


def state_dict_pickle(infos: Sequence[TensorInfo]) -> bytes:
    """`OrderedDict(name=_rebuild_tensor_v2(storage N, 0, shape, stride, False, OrderedDict()))`."""
    out = [_PROTO, _global("collections", "OrderedDict"), _EMPTY_TUPLE, _REDUCE]
    for key, info in enumerate(infos):
        out += [_text(info.name), _tensor(key, info), _SETITEM]
    out.append(_STOP)
    return b"".join(out)


def _tensor(key: int, info: TensorInfo) -> bytes:
    numel = 1
    for size in info.shape:
        numel *= size
    storage = [
        _MARK,
        _text("storage"),
        _global("torch", STORAGES[info.dtype]),
        _text(str(key)),
        _text("cpu"),
        _int(numel),
        _TUPLE,
        _BINPERSID,
    ]
    return b"".join(
        [
            _global("torch._utils", "_rebuild_tensor_v2"),
            _MARK,
            *storage,
            _int(0),
            _ints(tuple(info.shape)),
            _ints(_strides(tuple(info.shape))),
            _NEWFALSE,
            _global("collections", "OrderedDict"),
            _EMPTY_TUPLE,
            _REDUCE,
            _TUPLE,
            _REDUCE,
        ]
    )


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode("ascii") + b"\n" + name.encode("ascii") + b"\n"


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    return b"X" + struct.pack("<I", len(data)) + data


def _int(value: int) -> bytes:
    if 0 <= value < 1 << 31:
        return b"J" + struct.pack("<i", value)
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(data)]) + data  # LONG1


def _ints(values: tuple[int, ...]) -> bytes:
    return _MARK + b"".join(_int(v) for v in values) + _TUPLE if values else _EMPTY_TUPLE


FORMAT = OutputFormat(
    name="pytorch",
    suffixes=(".bin", ".pt", ".pth"),
    writes="a PyTorch state dict (torch.save's zip format)",
    check=check,
    lay_out=lay_out,
)
