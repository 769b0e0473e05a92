"""GGUFSource and GGUFSink: round trips, the gguf package as oracle, refused types."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSink, GGUFSource, TensorInfo
from lazyparams.io.gguf_format import DTYPE_TO_GGML

Check = Callable[[Any, np.ndarray], None]


def write_gguf(path: Path, tensors: dict[str, np.ndarray], order: list[str]) -> None:
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    with GGUFSink(path, infos, arch="test") as sink:
        for name in order:
            sink.write(name, tensors[name])


def test_round_trip_of_every_gguf_dtype(
    tmp_path: Path, make_tensors: Any, assert_same: Check
) -> None:
    tensors = make_tensors(DTYPE_TO_GGML)
    write_gguf(tmp_path / "m.gguf", tensors, list(reversed(tensors)))
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert source.names() == list(tensors)
        for name, want in tensors.items():
            want = want.reshape(want.shape or (1,))  # ggml has no 0-d tensors
            assert source.info(name) == TensorInfo.from_array(name, want)
            got = source.load(name)
            assert not got.flags.writeable
            assert_same(got, want)


def test_sink_output_matches_the_gguf_reader(tmp_path: Path) -> None:
    tensors = {
        "w": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "b": np.arange(3, dtype=np.int16),
    }
    write_gguf(tmp_path / "m.gguf", tensors, ["b", "w"])
    reader = GGUFReader(tmp_path / "m.gguf")
    by_name = {t.name: t for t in reader.tensors}
    assert by_name["w"].shape.tolist() == [4, 3, 2]  # GGUF lists dimensions innermost first
    assert np.array_equal(by_name["w"].data, tensors["w"])
    assert np.array_equal(by_name["b"].data, tensors["b"])


def test_file_written_by_the_gguf_writer_is_read(tmp_path: Path, assert_same: Check) -> None:
    writer = GGUFWriter(tmp_path / "m.gguf", "llama")
    want = np.arange(10, dtype=np.float16).reshape(2, 5)
    writer.add_tensor("tok_embd.weight", want)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with GGUFSource(tmp_path / "m.gguf") as source:
        assert_same(source.load("tok_embd.weight"), want)


def test_tensor_of_an_unknown_ggml_type_is_listed_but_refused_by_name_and_type(
    tmp_path: Path,
) -> None:
    writer = GGUFWriter(tmp_path / "q.gguf", "llama")
    writer.add_tensor("plain", np.ones(4, np.float32))
    q8k_block = np.zeros(292, np.uint8)  # one Q8_K block (ggml's internal dot-product type)
    writer.add_tensor("quant", q8k_block, raw_dtype=GGMLQuantizationType.Q8_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with GGUFSource(tmp_path / "q.gguf") as source:
        assert source.names() == ["plain", "quant"]
        assert source.load("plain").tolist() == [1.0] * 4
        for access in (source.info, source.load):
            with pytest.raises(
                CheckpointError, match="tensor 'quant' has GGML type Q8_K, which lazyparams"
            ):
                access("quant")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "bool", "uint8", "int4"])
def test_sink_refuses_dtypes_gguf_cannot_hold(tmp_path: Path, dtype: str) -> None:
    with pytest.raises(CheckpointError, match=f"tensor 'x': GGUF has no type for {dtype}"):
        GGUFSink(tmp_path / "m.gguf", [TensorInfo.of("x", (2,), dtype)])
    assert list(tmp_path.iterdir()) == []


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"GGUF" + b"\xff" * 12)
    with pytest.raises(CheckpointError, match=f"^{path}: not a readable GGUF file"):
        GGUFSource(path)


def test_truncated_data_is_refused_on_load(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(path, {"w": np.ones(64, ml_dtypes.bfloat16)}, ["w"])
    path.write_bytes(path.read_bytes()[:-40])
    try:
        source = GGUFSource(path)
    except CheckpointError as err:
        assert str(err).startswith(str(path))
        return
    with source, pytest.raises(CheckpointError, match="truncated"):
        source.load("w")
