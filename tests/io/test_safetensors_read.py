"""SafetensorsSource against files written by the safetensors library, and against bad files."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import SafetensorsSource, TensorInfo
from lazyparams.io.safetensors_format import DTYPE_TO_CODE

Check = Callable[[Any, np.ndarray], None]


def raw_file(path: Path, header: object, data: bytes = b"", length: int | None = None) -> Path:
    """A safetensors file from a header object and data bytes, with an optional fake length."""
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    prefix = struct.pack("<Q", len(text) if length is None else length)
    path.write_bytes(prefix + text + data)
    return path


def test_reads_every_dtype_written_by_the_library(
    tmp_path: Path, make_tensors: Any, assert_same: Check
) -> None:
    tensors = make_tensors(DTYPE_TO_CODE)
    save_file(tensors, tmp_path / "m.safetensors", metadata={"format": "np"})
    with SafetensorsSource(tmp_path / "m.safetensors") as source:
        assert sorted(source.names()) == sorted(tensors)
        assert source.metadata == {"format": "np"}
        for name, want in tensors.items():
            assert source.info(name) == TensorInfo.from_array(name, want)
            assert_same(source.load(name), want)


def test_loads_are_read_only_views_that_outlive_the_source(
    tmp_path: Path, assert_same: Check
) -> None:
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_file({"w": want}, tmp_path / "m.safetensors")
    source = SafetensorsSource(tmp_path / "m.safetensors")
    got = source.load("w")
    source.close()
    assert not got.flags.writeable and not got.flags.owndata and got.flags.aligned
    assert_same(got, want)
    with pytest.raises(ValueError):
        got[0, 0] = 1


def test_misaligned_tensor_is_copied_into_aligned_memory(tmp_path: Path) -> None:
    header = {
        "a": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [1, 9]},
    }
    path = raw_file(tmp_path / "odd.safetensors", header, b"\x07" + np.float32([1.5, -2]).tobytes())
    with SafetensorsSource(path) as source:
        got = source.load("b")
    assert got.flags.aligned and not got.flags.writeable
    assert got.tolist() == [1.5, -2.0]


def test_unknown_name_is_refused(tmp_path: Path) -> None:
    save_file({"w": np.zeros(2, np.float32)}, tmp_path / "m.safetensors")
    with (
        SafetensorsSource(tmp_path / "m.safetensors") as source,
        pytest.raises(CheckpointError, match="no tensor named 'x'"),
    ):
        source.load("x")


F32_3 = {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}
BAD_FILES = {
    "too_short": (lambda p: p.write_bytes(b"abc"), "too short for a header"),
    "length_past_end": (lambda p: raw_file(p, {"w": F32_3}, length=4096), "runs past the end"),
    "length_over_limit": (lambda p: raw_file(p, {}, length=200_000_000), "exceeds the limit"),
    "invalid_json": (lambda p: raw_file(p, b'{"w": {'), "header is not valid JSON"),
    "not_an_object": (lambda p: raw_file(p, b"[1, 2]   "), "not a JSON object"),
    "unknown_dtype": (
        lambda p: raw_file(p, {"w": {**F32_3, "dtype": "Q4"}}, bytes(12)),
        "tensor 'w': unknown or unsupported dtype 'Q4'",
    ),
    "offsets_disagree_with_shape": (
        lambda p: raw_file(p, {"w": {**F32_3, "data_offsets": [0, 8]}}, bytes(12)),
        r"hold 8 bytes, but shape \[3\] of F32 needs 12",
    ),
    "offsets_outside_data": (
        lambda p: raw_file(p, {"w": {**F32_3, "data_offsets": [100, 112]}}, bytes(12)),
        "outside the data area",
    ),
    "truncated_data": (lambda p: raw_file(p, {"w": F32_3}, bytes(7)), "truncated"),
    "overlapping": (
        lambda p: raw_file(
            p, {"a": F32_3, "b": {"dtype": "I32", "shape": [2], "data_offsets": [8, 16]}}, bytes(16)
        ),
        "tensors 'a' and 'b' overlap",
    ),
    "duplicate_key": (
        lambda p: raw_file(p, b'{"w": {}, "w": {}}', bytes(0)),
        "the key 'w' appears twice",
    ),
    "missing_keys": (lambda p: raw_file(p, {"w": {"dtype": "F32"}}), "expected keys"),
    "negative_shape": (
        lambda p: raw_file(p, {"w": {**F32_3, "shape": [-3]}}, bytes(12)),
        "tensor .w.: dimension -3 is not an integer in",
    ),
    "bad_metadata": (lambda p: raw_file(p, {"__metadata__": {"a": 1}}), "__metadata__"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_is_refused_naming_file_and_problem(tmp_path: Path, case: str) -> None:
    write, message = BAD_FILES[case]
    path = tmp_path / f"{case}.safetensors"
    write(path)
    with pytest.raises(CheckpointError, match=message) as caught:
        SafetensorsSource(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_truncated_library_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"a": np.ones(64, np.float32), "b": np.ones(64, np.int8)}, path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(CheckpointError, match=f"{path}: .*the file is truncated"):
        SafetensorsSource(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="cannot open"):
        SafetensorsSource(tmp_path / "absent.safetensors")
