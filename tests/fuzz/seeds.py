"""Valid seed checkpoints for the fuzz suite, one or more per source format, as bytes in memory.

A seed is a small file tree (relative path -> bytes) and the entry `open_source` is given. The
files are written by the project's own sinks, by numpy and by the safetensors library; torch
files are written opcode by opcode, since torch is not a test dependency.
"""

from __future__ import annotations

import struct
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

from lazyparams.io import GGUFSink, NpyFolderSink, NpzSink, SafetensorsSink, TensorInfo

Tree = dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Seed:
    """A valid checkpoint: `files` by relative path, `entry` the path opened ('.' the folder)."""

    format: str
    name: str
    files: Tree
    entry: str


def _tensors(variant: int) -> dict[str, np.ndarray]:
    """A handful of small tensors of several dtypes and ranks (an empty and a 0-d one too)."""
    rng = np.random.default_rng(variant)
    return {
        f"layers.{variant}.w": rng.standard_normal((4, 8)).astype(np.float32),
        f"layers.{variant}.b": rng.standard_normal((8,)).astype(np.float16),
        "emb.bf16": rng.standard_normal((2, 3)).astype(ml_dtypes.bfloat16),
        "ids": rng.integers(-100, 100, size=(3, 2, 2)).astype(np.int32),
        "mask": rng.integers(0, 2, size=(5,)).astype(bool),
        "scale": np.array(variant + 0.5, np.float32),
        "empty": np.zeros((0, 3), np.int8),
    }


def _gguf_tensors(variant: int) -> dict[str, np.ndarray]:
    """Tensors GGUF can hold (float32, float16, int8, int32), with 32-byte multiples of data."""
    rng = np.random.default_rng(variant)
    return {
        f"blk.{variant}.attn_q.weight": rng.standard_normal((2, 8)).astype(np.float32),
        "token_embd.weight": rng.standard_normal((4, 16)).astype(np.float16),
        "blk.0.ffn.weight": rng.integers(-9, 9, size=(2, 16)).astype(np.int8),
        "output_norm.weight": rng.integers(-9, 9, size=(8,)).astype(np.int32),
    }


def _read_tree(root: Path) -> Tree:
    """Every file under `root`, by path relative to it."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _through_sink(
    make: Callable[[Path, list[TensorInfo]], object], tensors: dict, root: Path
) -> None:
    """Write `tensors` with the sink `make(path, infos)` returns, finalizing it."""
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    with make(root, infos) as sink:  # type: ignore[attr-defined]
        for name, array in tensors.items():
            sink.write(name, array)


def _safetensors(work: Path, variant: int) -> list[Seed]:
    ours = work / f"st{variant}"
    _through_sink(lambda _, i: SafetensorsSink(ours / "m.safetensors", i), _tensors(variant), ours)
    lib = work / f"stlib{variant}"
    lib.mkdir()
    plain = {k: v for k, v in _tensors(variant).items() if v.dtype != ml_dtypes.bfloat16}
    save_file(plain, str(lib / "m.safetensors"), metadata={"format": "np"})
    sharded = work / f"sts{variant}"
    _through_sink(
        lambda _, i: SafetensorsSink(sharded / "m.safetensors", i, max_shard_size=96),
        _tensors(variant),
        sharded,
    )
    return [
        Seed("safetensors", f"sink{variant}", _read_tree(ours), "m.safetensors"),
        Seed("safetensors", f"lib{variant}", _read_tree(lib), "m.safetensors"),
        Seed("sharded", f"sink{variant}", _read_tree(sharded), "."),
    ]


def _numpy(work: Path, variant: int) -> list[Seed]:
    tensors = {k: v for k, v in _tensors(variant).items() if v.dtype != ml_dtypes.bfloat16}
    seeds = []
    for compress in (False, True):
        root = work / f"npz{variant}{compress}"
        path = root / "m.npz"
        _through_sink(lambda _, i, p=path, z=compress: NpzSink(p, i, compress=z), tensors, root)
        seeds.append(Seed("npz", f"sink{variant}{'z' * compress}", _read_tree(root), "m.npz"))
    lib = work / f"npzlib{variant}"
    lib.mkdir()
    np.savez_compressed(lib / "m.npz", **tensors)
    seeds.append(Seed("npz", f"numpy{variant}", _read_tree(lib), "m.npz"))
    folder = work / f"npy{variant}"
    _through_sink(lambda _, i: NpyFolderSink(folder / "out", i), tensors, folder)
    seeds.append(Seed("npy", f"sink{variant}", _read_tree(folder / "out"), "."))
    return seeds


def _q8_0_block(variant: int) -> np.ndarray:
    """One q8_0 block (32 weights): a float16 scale then 32 int8 quants, as raw bytes."""
    quants = np.random.default_rng(variant).integers(-127, 128, size=32).astype(np.int8)
    return np.frombuffer(np.float16(0.25).tobytes() + quants.tobytes(), np.uint8).copy()


def _write_gguf(root: Path, tensors: dict, meta: dict, shard_size: int | None) -> None:
    """A GGUF (split in parts of `shard_size` bytes if given) of `tensors` and one q8_0 tensor."""
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    infos.append(TensorInfo.of("blk.0.q8.weight", (32,), "q8_0"))
    with GGUFSink(root / "m.gguf", infos, metadata=meta, shard_size=shard_size) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
        sink.write("blk.0.q8.weight", _q8_0_block(len(tensors)))


def _gguf(work: Path, variant: int) -> list[Seed]:
    single, split = work / f"gguf{variant}", work / f"ggufs{variant}"
    meta = {"general.name": f"fuzz seed {variant}", "test.block_count": 2}
    tensors = _gguf_tensors(variant)
    _write_gguf(single, tensors, meta, None)
    _write_gguf(split, tensors, meta, 96)
    return [
        Seed("gguf", f"sink{variant}", _read_tree(single), "m.gguf"),
        Seed("split-gguf", f"sink{variant}", _read_tree(split), "."),
    ]


# -- torch zip checkpoints, written opcode by opcode ---------------------------------------------

_TORCH_STORAGES = {"float32": "FloatStorage", "float16": "HalfStorage", "int64": "LongStorage"}
_TORCH_STORAGES |= {"int8": "CharStorage", "bool": "BoolStorage", "bfloat16": "BFloat16Storage"}


def _text(value: str) -> bytes:
    data = value.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _int(value: int) -> bytes:
    return b"J" + struct.pack("<i", value)


def _tuple(*items: bytes) -> bytes:
    return b"(" + b"".join(items) + b"t"


def _global(module: str, name: str) -> bytes:
    return b"c" + f"{module}\n{name}\n".encode()


def _tensor_pickle(key: str, array: np.ndarray, storage_offset: int) -> bytes:
    """`_rebuild_tensor_v2(persistent storage, offset, size, stride, False, OrderedDict())`."""
    storage = _global("torch", _TORCH_STORAGES[str(array.dtype)])
    numel = _int(int(array.size) + storage_offset)
    persid = _tuple(_text("storage"), storage, _text(key), _text("cpu"), numel) + b"Q"
    strides = [s // array.itemsize for s in array.strides] if array.size else [1] * array.ndim
    args = _tuple(
        persid,
        _int(storage_offset),
        _tuple(*map(_int, array.shape)),
        _tuple(*map(_int, strides)),
        b"\x89",
        _global("collections", "OrderedDict") + b")R",
    )
    return _global("torch._utils", "_rebuild_tensor_v2") + args + b"R"


def torch_zip_bytes(tensors: dict[str, np.ndarray], compress: bool, nested: bool) -> bytes:
    """A zip-format torch checkpoint of `tensors` (one storage each, the second one offset)."""
    entries, storages = b"", {}
    for i, (name, array) in enumerate(tensors.items()):
        pad = i % 2
        storages[str(i)] = bytes(array.itemsize * pad) + np.ascontiguousarray(array).tobytes()
        entries += _text(name) + _tensor_pickle(str(i), array, pad)
    body = b"}(" + entries + b"u"
    data_pkl = b"\x80\x02" + (b"}" + _text("state_dict") + body + b"s" if nested else body) + b"."
    with tempfile.SpooledTemporaryFile() as buffer:
        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        with zipfile.ZipFile(buffer, "w", compression=method) as archive:
            archive.writestr("archive/data.pkl", data_pkl)
            archive.writestr("archive/byteorder", "little")
            for key, data in storages.items():
                archive.writestr(f"archive/data/{key}", data)
            archive.writestr("archive/version", "3\n")
        buffer.seek(0)
        return buffer.read()


def torch_legacy_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    """The pre-zip `torch.save` layout: magic, protocol and sys-info pickles, the state dict
    pickle, the storage-key list pickle, then each storage as an int64 count and its bytes."""
    magic = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."
    protocol = b"\x80\x02M\xe9\x03."
    sizes = b"}(" + _text("short") + b"K\x02" + _text("int") + b"K\x04" + _text("long") + b"K\x04u"
    info = b"}(" + _text("protocol_version") + b"M\xe9\x03" + _text("little_endian") + b"\x88"
    info = b"\x80\x02" + info + _text("type_sizes") + sizes + b"u."
    entries, keys, blobs = b"", b"", b""
    for i, (name, array) in enumerate(tensors.items()):
        entries += _text(name) + _tensor_pickle(str(i), array, 0)
        keys += _text(str(i))
        blobs += struct.pack("<q", array.size) + np.ascontiguousarray(array).tobytes()
    state = b"\x80\x02}(" + entries + b"u."
    return magic + protocol + info + state + b"\x80\x02](" + keys + b"e." + blobs


def _torch(variant: int) -> list[Seed]:
    tensors = {k: v for k, v in _tensors(variant).items() if str(v.dtype) in _TORCH_STORAGES}
    tensors["ids"] = np.arange(6, dtype=np.int64).reshape(2, 3).T  # a strided view
    seeds = []
    for compress, nested in ((False, False), (True, True)):
        data = torch_zip_bytes(tensors, compress, nested)
        seeds.append(Seed("torch", f"zip{variant}{'z' * compress}", {"m.bin": data}, "m.bin"))
    contiguous = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    legacy = {"m.pt": torch_legacy_bytes(contiguous)}
    return [*seeds, Seed("torch", f"legacy{variant}", legacy, "m.pt")]


def _merge(work: Path, variant: int) -> list[Seed]:
    """A merge configuration naming two safetensors models of one shape."""
    root = work / f"merge{variant}"
    tensors = {k: v for k, v in _tensors(variant).items() if v.dtype == np.float32}
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        save_file(tensors, str(root / name / "model.safetensors"))
    text = (
        "merge_method: linear\nmodels:\n"
        "  - model: a\n    parameters: {weight: 0.5}\n"
        "  - model: b\n    parameters:\n      weight: [0.2, 0.8]\n"
        f"dtype: float32\nout_dtype: {'bfloat16' if variant else 'float16'}\n"
    )
    (root / "merge.yml").write_text(text)
    return [Seed("merge", f"linear{variant}", _read_tree(root), "merge.yml")]


def build_seeds(variants: int = 2) -> list[Seed]:
    """Every seed of every format, `variants` of each (different names, shapes and values)."""
    seeds: list[Seed] = []
    with tempfile.TemporaryDirectory(prefix="lazyparams-fuzz-seeds-") as tmp:
        for variant in range(variants):
            work = Path(tmp) / str(variant)
            work.mkdir()
            seeds += _safetensors(work, variant) + _numpy(work, variant) + _gguf(work, variant)
            seeds += _torch(variant) + _merge(work, variant)
    return seeds


FORMATS = ("safetensors", "sharded", "npz", "npy", "torch", "gguf", "split-gguf", "merge")
