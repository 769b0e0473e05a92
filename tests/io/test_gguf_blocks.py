"""GGML block types through the io layer: sizes, the GGUF sink and source, row blocks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import dequantize, quantize

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSink, GGUFSource, TensorInfo, open_sink
from lazyparams.io.base import check_declared
from lazyparams.io.dtypes import numpy_dtype, storage_shape, tensor_nbytes

Q = GGMLQuantizationType


def blocks_of(type_name: str, x: np.ndarray) -> np.ndarray:
    """x's blocks, made by gguf-py's quantizer where it has one (an encoder independent of
    lazyparams), else bytes of the right layout whose scales are small finite float16s."""
    block = BLOCK_TYPES[type_name]
    try:
        return np.asarray(quantize(x, Q(block.ggml_id)))
    except NotImplementedError:
        raw = np.random.default_rng(9).integers(0, 256, block.storage_shape(x.shape), np.uint8)
        raw[..., 1::2] &= 0x3B
        return raw


def test_block_tensors_are_sized_exactly() -> None:
    assert TensorInfo.of("w", (4, 64), "q8_0").nbytes == 4 * 2 * 34
    assert TensorInfo.of("w", (3, 2, 512), "q4_k").nbytes == 6 * 2 * 144
    assert storage_shape("q5_1", (7, 96)) == (7, 72)
    assert numpy_dtype("iq2_xs") == np.uint8
    with pytest.raises(CheckpointError, match="multiple of 32, got shape \\[4, 48\\]"):
        tensor_nbytes("q8_0", (4, 48))


def test_a_block_tensor_is_written_as_uint8_rows_of_blocks() -> None:
    infos = {"w": TensorInfo.of("w", (2, 64), "q8_0")}
    check_declared("out", infos, "w", np.zeros((2, 68), np.uint8))
    with pytest.raises(CheckpointError, match=r"expected q8_0\[2, 64\] \(held as uint8\[2, 68\]\)"):
        check_declared("out", infos, "w", np.zeros((2, 64), np.uint8))


def _write(path: Path, tensors: dict[str, tuple[str, np.ndarray, tuple[int, ...]]]) -> None:
    infos = [TensorInfo.of(name, shape, dtype) for name, (dtype, _, shape) in tensors.items()]
    with GGUFSink(path, infos, arch="test") as sink:
        for name, (_, data, _) in tensors.items():
            sink.write(name, data)


def test_sink_writes_types_the_gguf_reader_sees(tmp_path: Path) -> None:
    x = np.random.default_rng(0).standard_normal((6, 512)).astype(np.float32)
    tensors = {
        name: (name, blocks_of(name, x), x.shape)
        for name in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q6_k")
    }
    tensors["norm"] = ("float32", x[0], (512,))
    _write(tmp_path / "m.gguf", tensors)
    reader = GGUFReader(tmp_path / "m.gguf")
    for tensor in reader.tensors:
        dtype, data, shape = tensors[tensor.name]
        assert tensor.tensor_type.name.lower() == ("f32" if dtype == "float32" else dtype)
        assert tensor.shape.tolist() == list(reversed(shape))
        assert np.array_equal(
            np.asarray(tensor.data).reshape(-1).view(np.uint8), data.reshape(-1).view(np.uint8)
        )


def test_source_lists_and_loads_blocks_and_rows(tmp_path: Path) -> None:
    x = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
    q = blocks_of("q4_k", x)
    _write(tmp_path / "m.gguf", {"w": ("q4_k", q, x.shape)})
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert source.info("w") == TensorInfo.of("w", (8, 256), "q4_k")
        loaded = source.load("w")
        assert loaded.dtype == np.uint8 and np.array_equal(loaded, q)
        assert np.array_equal(source.load_rows("w", 3, 7), q[3:7])
        values = dequantize(np.asarray(loaded), Q.Q4_K)
        assert np.array_equal(values, dequantize(q, Q.Q4_K))
        with pytest.raises(CheckpointError, match="columns share blocks"):
            source.load_cols("w", 0, 32)


def test_file_of_llama_cpp_types_is_read(tmp_path: Path) -> None:
    writer = GGUFWriter(tmp_path / "m.gguf", "llama")
    x = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    writer.add_tensor("a", blocks_of("q8_0", x), raw_dtype=Q.Q8_0)
    writer.add_tensor("b", np.zeros((4, 66), np.uint8), raw_dtype=Q.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert source.info("a") == TensorInfo.of("a", (4, 256), "q8_0")
        assert source.info("b") == TensorInfo.of("b", (4, 256), "iq2_xxs")
        assert np.array_equal(source.load("a"), blocks_of("q8_0", x))


def test_row_blocks_of_block_tensors(tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((6, 64)).astype(np.float32)
    q = blocks_of("q5_0", x)
    info = TensorInfo.of("w", x.shape, "q5_0")
    with GGUFSink(tmp_path / "m.gguf", [info, TensorInfo.of("v", (64,), "q8_0")]) as sink:
        sink.write_rows("w", 2, q[2:])
        sink.write_rows("w", 0, q[:2])
        with pytest.raises(CheckpointError, match=r"expected rows q5_0\[n, 64\]"):
            sink.write_rows("w", 0, np.zeros((1, 64), np.uint8))
        with pytest.raises(CheckpointError, match="one row of q8_0 blocks"):
            sink.write_rows("v", 0, np.zeros((34,), np.uint8))
        sink.write("v", blocks_of("q8_0", x[0]))
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert np.array_equal(source.load("w"), q)


def test_sink_refuses_a_block_tensor_of_partial_blocks(tmp_path: Path) -> None:
    bad = TensorInfo("w", (2, 40), "q8_0", 0)
    with pytest.raises(CheckpointError, match="tensor 'w': a q8_0 tensor needs a last dim"):
        GGUFSink(tmp_path / "m.gguf", [bad])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("suffix", "message"),
    [("safetensors", "safetensors has no dtype"), ("npz", ".npy has no dtype")],
)
def test_formats_without_block_types_refuse_them(tmp_path: Path, suffix: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=f"tensor 'w': {message} for q8_0"):
        open_sink(tmp_path / f"m.{suffix}", [TensorInfo.of("w", (2, 64), "q8_0")])
    assert list(tmp_path.iterdir()) == []
