"""npz archives and folders of .npy: round trips, interop with plain numpy, bad files."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import (
    DTYPE_NAMES,
    NpyFolderSink,
    NpyFolderSource,
    NpzSink,
    NpzSource,
    TensorInfo,
)

Check = Callable[[Any, np.ndarray], None]
PLAIN = ["float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


def infos_of(tensors: dict[str, np.ndarray]) -> list[TensorInfo]:
    return [TensorInfo.from_array(name, array) for name, array in tensors.items()]


@pytest.mark.parametrize("compress", [False, True])
def test_npz_round_trip_of_every_dtype(
    tmp_path: Path, make_tensors: Any, assert_same: Check, compress: bool
) -> None:
    tensors = make_tensors(DTYPE_NAMES)
    with NpzSink(tmp_path / "m.npz", infos_of(tensors), compress=compress) as sink:
        for name in reversed(tensors):
            sink.write(name, tensors[name])
    with NpzSource(tmp_path / "m.npz") as source:
        assert source.names() == list(reversed(tensors))
        for name, want in tensors.items():
            assert source.info(name) == TensorInfo.from_array(name, want)
            got = source.load(name)
            assert not got.flags.writeable
            assert_same(got, want)


def test_npz_from_the_sink_is_read_by_plain_numpy(tmp_path: Path, make_tensors: Any) -> None:
    tensors = make_tensors([*PLAIN, "bfloat16"])
    with NpzSink(tmp_path / "m.npz", infos_of(tensors)) as sink:
        for name, array in tensors.items():
            sink.write(name, array)
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == sorted(tensors)
        bf16 = next(n for n in tensors if "bfloat16" in n)
        assert archive[bf16].dtype == np.uint16  # raw bits, tagged for lazyparams
        assert np.array_equal(archive[bf16].view(ml_dtypes.bfloat16), tensors[bf16])


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_written_by_numpy_is_read(
    tmp_path: Path, make_tensors: Any, assert_same: Check, save: Any
) -> None:
    tensors = make_tensors(PLAIN)
    tensors["fortran"] = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    tensors["big_endian"] = np.arange(5, dtype=">i4")
    save(tmp_path / "m.npz", **tensors)
    with NpzSource(tmp_path / "m.npz") as source:
        for name, want in tensors.items():
            assert_same(source.load(name), want.astype(want.dtype.newbyteorder("=")))


def test_npy_folder_round_trip_with_subfolders(
    tmp_path: Path, make_tensors: Any, assert_same: Check
) -> None:
    tensors = {f"block/{name}": array for name, array in make_tensors(DTYPE_NAMES).items()}
    tensors["top"] = np.ones(3, np.float32)
    with NpyFolderSink(tmp_path / "out", infos_of(tensors)) as sink:
        for name in reversed(tensors):
            sink.write(name, tensors[name])
    assert (tmp_path / "out" / "block").is_dir() and (tmp_path / "out" / "top.npy").is_file()
    tags = json.loads((tmp_path / "out" / "dtypes.json").read_text())
    assert set(tags.values()) == {"bfloat16", "float8_e4m3fn", "float8_e5m2", "int4"}
    with NpyFolderSource(tmp_path / "out") as source:
        assert sorted(source.names()) == sorted(tensors)
        for name, want in tensors.items():
            assert_same(source.load(name), want)


def test_npy_folder_of_plain_numpy_files(tmp_path: Path, assert_same: Check) -> None:
    np.save(tmp_path / "a.npy", np.arange(6, dtype=np.int16).reshape(2, 3))
    np.save(tmp_path / "f.npy", np.asfortranarray(np.ones((2, 3), np.float64)))
    with NpyFolderSource(tmp_path) as source:
        assert source.names() == ["a", "f"]
        assert_same(source.load("a"), np.arange(6, dtype=np.int16).reshape(2, 3))
        assert_same(source.load("f"), np.ones((2, 3), np.float64))
    assert not (tmp_path / "dtypes.json").exists()


def test_npy_folder_without_extension_dtypes_has_no_tag_file(tmp_path: Path) -> None:
    with NpyFolderSink(tmp_path / "out", [TensorInfo.of("w", (2,), "float32")]) as sink:
        sink.write("w", np.ones(2, np.float32))
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["w.npy"]


def object_npz(path: Path) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil.npy", buffer.getvalue())


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (object_npz, "object arrays need pickle"),
        (lambda p: p.write_bytes(b"not a zip"), "not a readable .npz archive"),
        (
            lambda p: np.savez(p, w=np.zeros(2, ml_dtypes.bfloat16)),
            "unsupported dtype .*lose their type",
        ),
    ],
    ids=["object_array", "not_a_zip", "untagged_extension_dtype"],
)
def test_bad_npz_is_refused(tmp_path: Path, write: Any, message: str) -> None:
    path = tmp_path / "bad.npz"
    write(path)
    with pytest.raises(CheckpointError, match=message) as caught:
        NpzSource(path)
    assert str(caught.value).startswith(str(path))


def test_wrong_tag_in_npy_folder_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "w.npy", np.zeros(2, np.uint8))
    (tmp_path / "dtypes.json").write_text('{"w": "bfloat16"}')
    with pytest.raises(CheckpointError, match=r"w.npy: dtype tag 'bfloat16' does not fit stored"):
        NpyFolderSource(tmp_path)


@pytest.mark.parametrize("name", ["../escape", "/abs", "a//b", "a/./b", ""])
def test_npy_folder_sink_refuses_names_that_are_not_relative_paths(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(CheckpointError, match="cannot be a file name"):
        NpyFolderSink(tmp_path / "out", [TensorInfo.of(name, (1,), "int8")])
    assert list(tmp_path.iterdir()) == []
