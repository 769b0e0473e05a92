"""The bounded GGUF reader against gguf's GGUFReader on valid files (the same values, types,
tensors and bytes), and a seeded set of mutated small files that are each read or refused."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValue, GGUFValueType

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSink, GGUFSource, TensorInfo, read_gguf_metadata
from lazyparams.io.gguf_reader import GGUFHeader, read_gguf_header
from tests.io.gguf_samples import write_sample

T = GGUFValueType
VOCAB = ["<s>", "</s>", "▁the", "é", "🙂", "", "a b"] + [f"tok{i}" for i in range(500)]
METADATA: dict[str, Any] = {
    "general.name": "oracle",
    "llama.block_count": 2,
    "llama.rope.freq_base": 10000.5,
    "tokenizer.ggml.tokens": VOCAB,
    "tokenizer.ggml.scores": [float(-i) / 3 for i in range(len(VOCAB))],
    "tokenizer.ggml.token_type": GGUFValue([1] * len(VOCAB), T.ARRAY, T.INT32),
    "tokenizer.ggml.add_bos_token": True,
}


def gguf_reader_metadata(path: Path) -> dict[str, GGUFValue]:
    """What read_gguf_metadata(include_split=True) gave when it read with GGUFReader."""
    reader = GGUFReader(path)
    return {key: _reader_value(field) for key, field in reader.fields.items() if "GGUF." not in key}


def _reader_value(field: Any) -> GGUFValue:
    kind = field.types[0]
    if kind != T.ARRAY:
        return GGUFValue(_reader_scalar(field.parts[field.data[0]], kind), kind)
    sub = field.types[1] if len(field.types) > 1 else T(int(field.parts[3][0]))
    if sub == T.STRING:
        return GGUFValue([_reader_text(field.parts[i]) for i in field.data], kind, sub)
    items = np.concatenate([field.parts[i] for i in field.data]).tolist() if field.data else []
    return GGUFValue([bool(x) for x in items] if sub == T.BOOL else items, kind, sub)


def _reader_scalar(part: Any, kind: GGUFValueType) -> Any:
    if kind == T.STRING:
        return _reader_text(part)
    item = part.tolist()[0]
    return bool(item) if kind == T.BOOL else item


def _reader_text(part: Any) -> str | bytes:
    raw = bytes(part.tobytes())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def exact(value: Any) -> Any:
    """`value` with every float as its bytes and every item tagged by its type, so that two
    values compare equal only when they are bit for bit the same (NaN included)."""
    if isinstance(value, GGUFValue):
        return (value.type, value.sub_type, exact(value.value))
    if isinstance(value, list):
        return [exact(item) for item in value]
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    return (type(value).__name__, value)


def sink_file(path: Path, shard_size: int | None = None) -> list[Path]:
    """A GGUFSink output with a tokenizer's metadata and tensors of plain and block types."""
    rng = np.random.default_rng(0)
    tensors = {
        "token_embd.weight": rng.standard_normal((len(VOCAB), 8)).astype(np.float16),
        "blk.0.attn_q.weight": rng.integers(0, 255, (4, 144), dtype=np.uint8),
        "blk.0.ffn_down.weight": rng.standard_normal((3, 5)).astype(np.float32),
        "output_norm.weight": rng.standard_normal(8).astype(np.float32),
    }
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    infos[1] = TensorInfo.of("blk.0.attn_q.weight", (4, 256), "q4_k")
    with GGUFSink(path, infos, metadata=METADATA, arch="llama", shard_size=shard_size) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    return sink.files


@pytest.fixture(name="valid_files")
def valid_files_fixture(tmp_path: Path) -> list[Path]:
    return [
        write_sample(tmp_path / "sample.gguf"),
        write_sample(tmp_path / "aligned.gguf", alignment=128),
        write_sample(tmp_path / "pairs.gguf", tensors=False),
        write_sample(tmp_path / "big-endian.gguf", big_endian=True),
        *sink_file(tmp_path / "sink.gguf"),
        *sink_file(tmp_path / "split.gguf", shard_size=600),
    ]


def test_the_same_pairs_as_gguf_reader_bit_for_bit(valid_files: list[Path]) -> None:
    assert len(valid_files) > 6  # the split output has several parts
    for path in valid_files:
        want = gguf_reader_metadata(path)
        got = read_gguf_metadata(path, include_split=True)
        assert list(got) == list(want), path
        assert [exact(v) for v in got.values()] == [exact(v) for v in want.values()], path


def test_the_same_tensors_and_bytes_as_gguf_reader(valid_files: list[Path]) -> None:
    for path in valid_files:
        reader, header = GGUFReader(path), read_gguf_header(path)
        assert header.data_offset == reader.data_offset and header.alignment == reader.alignment
        got = [(t.name, t.ggml_type, t.shape, t.offset, t.nbytes) for t in header.tensors]
        want = [
            (t.name, t.tensor_type, tuple(reversed(t.shape.tolist())), t.data_offset, t.n_bytes)
            for t in reader.tensors
        ]
        assert got == want, path
        if header.byte_order == "<":
            with GGUFSource(path, split_part=True) as source:
                for tensor in reader.tensors:
                    assert source.load(tensor.name).tobytes() == tensor.data.tobytes()


def mutants(data: bytes, rng: random.Random, count: int) -> list[bytes]:
    """`count` seeded mutations of `data`: flipped bits, extreme integers written over any
    field, truncations, extensions and spliced chunks."""
    extremes = [0, 1, 5, 255, 2**31, 2**32 - 1, 2**62, 2**63, 2**64 - 1]
    out = []
    for _ in range(count):
        buf = bytearray(data)
        kind = rng.randrange(5)
        at = rng.randrange(len(buf) - 8)
        if kind == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            width, value = rng.choice([("<I", 2**32 - 1), ("<Q", 2**64 - 1)]), rng.choice(extremes)
            struct.pack_into(width[0], buf, at, value % (width[1] + 1))
        elif kind == 2:
            del buf[at:]
        elif kind == 3:
            buf += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        else:
            chunk = buf[at : at + rng.randrange(1, 64)]
            buf[rng.randrange(len(buf)) :][:0] = chunk if rng.random() < 0.5 else b""
            del buf[at : at + rng.randrange(0, 16)]
        out.append(bytes(buf))
    return out


def read_all(path: Path) -> GGUFHeader:
    """The header, the metadata and every tensor the source can load: each either read or
    refused with a CheckpointError naming the file."""
    header = read_gguf_header(path)
    assert all(isinstance(value, GGUFValue) for value in header.values.values())
    try:
        read_gguf_metadata(path, include_split=True)
        with GGUFSource(path, split_part=True) as source:
            for entry in header.tensors:
                assert source.load(entry.name).nbytes == entry.nbytes
    except CheckpointError as err:
        assert str(err).startswith(str(path))
    return header


def test_seeded_mutations_of_small_files_are_each_read_or_refused(tmp_path: Path) -> None:
    bases = [write_sample(tmp_path / "a.gguf"), *sink_file(tmp_path / "b.gguf")]
    rng = random.Random(14)
    outcomes = {"read": 0, "refused": 0}
    for base in bases:
        for index, data in enumerate(mutants(base.read_bytes(), rng, 200)):
            assert len(data) < 1 << 20
            path = tmp_path / f"mutant-{index}.gguf"
            path.write_bytes(data)
            try:
                read_all(path)
                outcomes["read"] += 1
            except CheckpointError as err:
                assert str(err).startswith(f"{path}: "), str(err)
                outcomes["refused"] += 1
            path.unlink()
    assert outcomes["read"] > 20 and outcomes["refused"] > 150, outcomes


def dense_header(kind: str, size: int = 1 << 18) -> bytes:
    """A header of about `size` bytes packed with the cheapest items of one kind: the files
    that cost a reader the most objects per byte (the fuzz suite times them at a megabyte)."""

    def pairs(count: int, body: bytes) -> bytes:
        return b"GGUF" + struct.pack("<IQQ", 3, 0, count) + body

    def array(sub: GGUFValueType, count: int, items: bytes) -> bytes:
        return pairs(
            1, struct.pack("<Q", 1) + b"a" + struct.pack("<IIQ", T.ARRAY, sub, count) + items
        )

    if kind == "bools":
        return array(T.BOOL, size, b"\x01" * size)
    if kind == "int16":
        return array(T.INT16, size // 2, struct.pack("<h", -1000) * (size // 2))
    if kind == "empty strings":
        return array(T.STRING, size // 8, bytes(8 * (size // 8)))
    if kind == "raw strings":
        return array(T.STRING, size // 9, (struct.pack("<Q", 1) + b"\xff") * (size // 9))
    if kind == "pairs":
        n = size // 20
        return pairs(
            n, b"".join(struct.pack("<Q6sIB", 6, b"%06d" % i, T.UINT8, 1) for i in range(n))
        )
    n = size // 38  # tensors: empty F32 tensors of one dimension at offset 0
    infos = b"".join(struct.pack("<Q6sIQIQ", 6, b"%06d" % i, 1, 0, 0, 0) for i in range(n))
    body = b"GGUF" + struct.pack("<IQQ", 3, n, 0) + infos
    return body + bytes(-len(body) % 32)


@pytest.mark.parametrize(
    "kind", ["bools", "int16", "empty strings", "raw strings", "pairs", "tensors"]
)
def test_dense_headers_are_read(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "dense.gguf"
    path.write_bytes(dense_header(kind))
    assert path.stat().st_size <= 1 << 19
    header = read_all(path)
    assert len(header.values) + len(header.tensors) >= 1
