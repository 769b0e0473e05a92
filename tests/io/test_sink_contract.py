"""What every sink promises: round trips through the matching source, validation, clean abort."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import (
    DTYPE_NAMES,
    CheckpointSink,
    CheckpointSource,
    DictSink,
    DictSource,
    SinkBase,
    TensorInfo,
    open_sink,
    open_source,
)
from lazyparams.io.gguf_format import DTYPE_TO_GGML
from lazyparams.io.safetensors_format import DTYPE_TO_CODE

Check = Callable[[Any, np.ndarray], None]
MakeSink = Callable[[Path, list[TensorInfo]], SinkBase]

SINKS: dict[str, tuple[MakeSink, list[str]]] = {
    "safetensors": (lambda d, i: open_sink(d / "m.safetensors", i), list(DTYPE_TO_CODE)),
    "sharded": (lambda d, i: open_sink(d / "out", i, shard_size=100), list(DTYPE_TO_CODE)),
    "npz": (lambda d, i: open_sink(d / "m.npz", i), list(DTYPE_NAMES)),
    "npy": (lambda d, i: open_sink(d / "out", i, format="npy"), list(DTYPE_NAMES)),
    "gguf": (lambda d, i: open_sink(d / "m.gguf", i), list(DTYPE_TO_GGML)),
    "gguf-split": (lambda d, i: open_sink(d / "m.gguf", i, shard_size=100), list(DTYPE_TO_GGML)),
    "dict": (lambda d, i: DictSink(i, path=str(d / "memory")), list(DTYPE_NAMES)),
}


def reopen(sink: SinkBase, folder: Path) -> CheckpointSource:
    if isinstance(sink, DictSink):
        return DictSource(sink.tensors)
    path = Path(sink.path)
    return open_source(path if path.exists() else path.parent)  # a split GGUF: its folder


def infos_of(tensors: dict[str, np.ndarray]) -> list[TensorInfo]:
    return [TensorInfo.from_array(name, array) for name, array in tensors.items()]


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_round_trip_in_shuffled_order(
    tmp_path: Path, kind: str, make_tensors: Any, assert_same: Check
) -> None:
    make, dtypes = SINKS[kind]
    tensors = {n: a for n, a in make_tensors(dtypes).items() if "gguf" not in kind or a.ndim}
    order = list(tensors)
    np.random.default_rng(3).shuffle(order)
    sink = make(tmp_path, infos_of(tensors))
    assert isinstance(sink, CheckpointSink)
    with sink:
        for name in order:
            sink.write(name, tensors[name])
    with reopen(sink, tmp_path) as source:
        assert isinstance(source, CheckpointSource)
        assert sorted(source.names()) == sorted(tensors)
        for name, want in tensors.items():
            assert source.info(name) == TensorInfo.from_array(name, want)
            assert_same(source.load(name), want)


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*"))


BAD_WRITES = {
    "undeclared": (("nope", np.zeros((2, 3), np.float32)), "tensor 'nope' was not declared"),
    "wrong_shape": (
        ("w", np.zeros((3, 2), np.float32)),
        r"tensor 'w': expected float32\[2, 3\], got float32\[3, 2\]",
    ),
    "wrong_dtype": (
        ("w", np.zeros((2, 3), np.float16)),
        r"tensor 'w': expected float32\[2, 3\], got float16\[2, 3\]",
    ),
}


@pytest.mark.parametrize("kind", sorted(SINKS))
@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_bad_write_is_refused_and_abort_leaves_nothing(
    tmp_path: Path, kind: str, case: str
) -> None:
    (name, array), message = BAD_WRITES[case]
    infos = [TensorInfo.of("w", (2, 3), "float32"), TensorInfo.of("b", (3,), "float32")]
    with (
        pytest.raises(CheckpointError, match=message) as caught,
        SINKS[kind][0](tmp_path, infos) as sink,
    ):
        sink.write("b", np.ones(3, np.float32))
        sink.write(name, array)
    assert str(caught.value).startswith(sink.path)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_writing_twice_is_refused(tmp_path: Path, kind: str) -> None:
    infos = [TensorInfo.of("w", (2,), "int32")]
    with (
        pytest.raises(CheckpointError, match="tensor 'w' was written twice"),
        SINKS[kind][0](tmp_path, infos) as sink,
    ):
        sink.write("w", np.ones(2, np.int32))
        sink.write("w", np.ones(2, np.int32))
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_finalize_with_a_missing_tensor_is_refused_and_leaves_nothing(
    tmp_path: Path, kind: str
) -> None:
    infos = [TensorInfo.of("w", (2,), "int32"), TensorInfo.of("v", (2,), "int32")]
    sink = SINKS[kind][0](tmp_path, infos)
    sink.write("w", np.ones(2, np.int32))
    with pytest.raises(CheckpointError, match="tensor 'v' was never written"):
        sink.finalize()
    assert files_under(tmp_path) == []
    with pytest.raises(CheckpointError, match="already aborted"):
        sink.write("v", np.ones(2, np.int32))


@pytest.mark.parametrize("kind", sorted(SINKS))
def test_exception_in_with_block_aborts(tmp_path: Path, kind: str) -> None:
    infos = [TensorInfo.of("w", (2,), "int32")]
    with pytest.raises(KeyError), SINKS[kind][0](tmp_path, infos) as sink:
        sink.write("w", np.ones(2, np.int32))
        raise KeyError("boom")
    assert files_under(tmp_path) == []


def test_declaring_a_name_twice_is_refused(tmp_path: Path) -> None:
    infos = [TensorInfo.of("w", (2,), "int32")] * 2
    with pytest.raises(CheckpointError, match="tensor 'w' is declared twice"):
        open_sink(tmp_path / "m.safetensors", infos)
    assert files_under(tmp_path) == []


def test_write_after_finalize_is_refused(tmp_path: Path) -> None:
    sink = open_sink(tmp_path / "m.npz", [])
    sink.finalize()
    with pytest.raises(CheckpointError, match="already finalized"):
        sink.write("w", np.ones(1))
    sink.abort()  # a no-op once finalized
    assert (tmp_path / "m.npz").exists()


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (TensorInfo("w", (2, 3), "float32", 7), "tensor 'w': nbytes 7 disagrees"),
        (TensorInfo("w", (2,), "complex64", 16), "tensor 'w': unknown dtype 'complex64'"),
        (TensorInfo.of("__metadata__", (1,), "int8"), "reserved for the header's metadata"),
    ],
)
def test_bad_declarations_are_refused(tmp_path: Path, info: TensorInfo, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        open_sink(tmp_path / "m.safetensors", [info])
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("kind", ["safetensors", "npz", "npy", "gguf"])
def test_a_sink_dropped_unfinished_removes_its_temporaries(tmp_path: Path, kind: str) -> None:
    sink = SINKS[kind][0](tmp_path, [TensorInfo.of("w", (2,), "int32")])
    sink.write("w", np.ones(2, np.int32))
    del sink
    gc.collect()
    assert files_under(tmp_path) == []
