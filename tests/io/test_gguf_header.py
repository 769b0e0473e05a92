"""The GGUF head we pack is gguf-py's writer's, byte for byte: every value type, arrays of each,
strings as str and bytes, no architecture, other alignments, block-typed and scalar tensors."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFValue, GGUFValueType, GGUFWriter

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.io.base import TensorInfo
from lazyparams.io.gguf_format import lay_out_gguf
from lazyparams.io.gguf_header import TableEntry, head_bytes, pad
from lazyparams.io.gguf_metadata import GGUFMetadata, check_gguf_metadata

T = GGUFValueType

VALUES = {
    "a.u8": GGUFValue(255, T.UINT8),
    "a.i8": GGUFValue(-128, T.INT8),
    "a.u16": GGUFValue(65535, T.UINT16),
    "a.i16": GGUFValue(-32768, T.INT16),
    "a.u32": GGUFValue(2**32 - 1, T.UINT32),
    "a.i32": GGUFValue(-(2**31), T.INT32),
    "a.u64": GGUFValue(2**64 - 1, T.UINT64),
    "a.i64": GGUFValue(-(2**63), T.INT64),
    "a.f32": GGUFValue(0.1, T.FLOAT32),
    "a.f64": GGUFValue(-1e300, T.FLOAT64),
    "a.bool": GGUFValue(True, T.BOOL),
    "a.str": GGUFValue("héllo ✓", T.STRING),
    "a.empty_str": GGUFValue("", T.STRING),
    "tokenizer.tokens": GGUFValue(["<s>", "▁the", "", "日本", b"\xff\x00"], T.ARRAY, T.STRING),
    "tokenizer.scores": GGUFValue([0.0, -1.5, 3.4e38, float("inf"), 1e-45], T.ARRAY, T.FLOAT32),
    "tokenizer.types": GGUFValue([1, 2, 3, 6, -7], T.ARRAY, T.INT32),
    "u64s": GGUFValue([0, 2**64 - 1], T.ARRAY, T.UINT64),
    "f64s": GGUFValue([0.1, -2.5], T.ARRAY, T.FLOAT64),
    "bools": GGUFValue([True, False, True], T.ARRAY, T.BOOL),
    "u8s": GGUFValue([0, 7, 255], T.ARRAY, T.UINT8),
    "i16s": GGUFValue([-3, 3], T.ARRAY, T.INT16),
    "ключ": GGUFValue(1, T.UINT32),
}

INFOS = [
    TensorInfo.of("token_embd.weight", (320, 64), "float16"),
    TensorInfo.of("blk.0.attn_q.weight", (64, 64), "q8_0"),
    TensorInfo.of("blk.0.ffn_up.weight", (3, 256), "q4_k"),
    TensorInfo.of("scalar", (), "float32"),
    TensorInfo.of("odd", (3, 5, 7), "int8"),
]


def _writer_head(
    arch: str | None,
    values: dict[str, GGUFValue],
    alignment: int,
    infos: list[TensorInfo] = INFOS,
) -> bytes:
    """What gguf-py writes before the data, for the same pairs and tensor table."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.gguf"
        writer = GGUFWriter(path, arch or "")
        if arch is None:
            writer.kv_data[0].pop("general.architecture", None)
        for key, value in values.items():
            writer.add_key_value(key, value.value, value.type, value.sub_type)
        writer.data_alignment = alignment
        for info in infos:
            block = BLOCK_TYPES.get(info.dtype)
            shape = info.shape or (1,)
            if block is not None:
                kind = GGMLQuantizationType[info.dtype.upper()]
                writer.add_tensor_info(
                    info.name, shape, np.dtype(np.float32), info.nbytes, raw_dtype=kind
                )
            else:
                writer.add_tensor_info(info.name, shape, np.dtype(info.dtype), info.nbytes)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        writer.close()
        return path.read_bytes()


@pytest.mark.parametrize("arch", ["llama", None])
@pytest.mark.parametrize("alignment", [32, 64, 8])
def test_the_head_is_gguf_py_writers_byte_for_byte(arch: str | None, alignment: int) -> None:
    metadata = GGUFMetadata(arch, dict(VALUES), alignment)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ours.gguf"
        offsets, size = lay_out_gguf(path, INFOS, metadata)
        ours = path.read_bytes()
    want = _writer_head(arch, VALUES, alignment)
    start = pad(len(want), alignment)
    assert ours[: len(want)] == want
    assert ours[len(want) :] == bytes(size - len(want))  # padding, then the data's zeros
    data = [start]
    for info in INFOS[:-1]:
        data.append(data[-1] + pad(info.nbytes, alignment))
    assert list(offsets.values()) == data
    assert size == data[-1] + pad(INFOS[-1].nbytes, alignment)


def test_checked_metadata_packs_as_the_writer_does() -> None:
    """Plain values typed by check_gguf_metadata (the engine's path) give the writer's bytes."""
    plain = {"general.name": "m", "x.list": [1, 2, 3], "x.f": 1.5, "x.flag": False}
    metadata = check_gguf_metadata(plain, arch="qwen2")
    table = [TableEntry("w", (2, 2), 0, 16)]
    head, offsets = head_bytes(metadata.arch, metadata.values.items(), table, 32)
    assert offsets == [0]
    info = TensorInfo.of("w", (2, 2), "float32")
    assert head == _writer_head(metadata.arch, metadata.values, 32, [info])
