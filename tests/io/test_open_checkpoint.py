"""open_source and open_sink: format detection by extension, folder contents and magic bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import (
    GGUFSink,
    GGUFSource,
    NpyFolderSink,
    NpyFolderSource,
    NpzSink,
    NpzSource,
    SafetensorsSink,
    SafetensorsSource,
    ShardedSource,
    TensorInfo,
    open_sink,
    open_source,
)

W = np.arange(6, dtype=np.float32).reshape(2, 3)
INFOS = [TensorInfo.from_array("w", W)]


def write(path: Path, **options: object) -> Path:
    with open_sink(path, INFOS, **options) as sink:  # type: ignore[arg-type]
        sink.write("w", W)
    return path


@pytest.mark.parametrize(
    ("name", "options", "sink_type", "source_type"),
    [
        ("m.safetensors", {}, SafetensorsSink, SafetensorsSource),
        ("m.npz", {}, NpzSink, NpzSource),
        ("m.gguf", {}, GGUFSink, GGUFSource),
        ("out", {"format": "npy"}, NpyFolderSink, NpyFolderSource),
        ("out", {"format": "safetensors"}, SafetensorsSink, SafetensorsSource),
    ],
)
def test_sink_and_source_are_chosen_by_name_or_format(
    tmp_path: Path, name: str, options: dict, sink_type: type, source_type: type
) -> None:
    sink = open_sink(tmp_path / name, INFOS, **options)
    assert isinstance(sink, sink_type)
    sink.write("w", W)
    sink.finalize()
    with open_source(tmp_path / name) as source:
        assert isinstance(source, source_type)
        assert np.array_equal(source.load("w"), W)


def test_folder_prefers_the_safetensors_index(tmp_path: Path) -> None:
    tensors = {"a": np.ones(8, np.float32), "b": np.zeros(8, np.float32)}
    infos = [TensorInfo.from_array(n, a) for n, a in tensors.items()]
    with open_sink(tmp_path, infos, shard_size=32) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    (tmp_path / "pytorch_model.bin.index.json").write_text("{}")
    with open_source(tmp_path) as source:
        assert isinstance(source, ShardedSource)
        assert sorted(source.names()) == ["a", "b"]


def test_unknown_extension_is_sniffed_from_the_first_bytes(tmp_path: Path) -> None:
    for name in ("m.safetensors", "m.gguf", "m.npz"):
        write(tmp_path / name)
        shutil.move(tmp_path / name, tmp_path / f"{name}.weights")
        with open_source(tmp_path / f"{name}.weights") as source:
            assert np.array_equal(source.load("w"), W)


def test_unrecognised_inputs_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello, world")
    with pytest.raises(CheckpointError, match=r"notes\.txt: cannot tell the checkpoint format"):
        open_source(tmp_path / "notes.txt")
    with pytest.raises(CheckpointError, match="no such file or folder"):
        open_source(tmp_path / "absent.safetensors")
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        open_source(tmp_path)


def test_folder_with_several_weight_files_and_no_index_is_refused(tmp_path: Path) -> None:
    save_file({"a": W}, tmp_path / "one.safetensors")
    save_file({"b": W}, tmp_path / "two.safetensors")
    with pytest.raises(CheckpointError, match=r"several \.safetensors files .* and no index"):
        open_source(tmp_path)


def test_sink_options_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="cannot tell the output format"):
        open_sink(tmp_path / "out", INFOS)
    with pytest.raises(CheckpointError, match="sharding is only supported for safetensors"):
        open_sink(tmp_path / "m.npz", INFOS, shard_size=10)
    with pytest.raises(
        CheckpointError, match="expected one of safetensors, gguf, npy, npz, pytorch, got 'onnx'"
    ):
        open_sink(tmp_path / "m.onnx", INFOS, format="onnx")
    assert list(tmp_path.iterdir()) == []
