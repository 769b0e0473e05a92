"""Hostile safetensors files: bounded parsing, the exact-cover layout, names, and load failures.

Each case builds its bad file in tmp_path and checks the message names the file (and the tensor
where there is one) and says what was expected. Layout cases are also run through the reference
library, which must refuse (or accept) them too.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from lazyparams.errors import CheckpointError
from lazyparams.io import SafetensorsSource, TensorInfo, filemap
from lazyparams.io.safetensors_format import build_header, parse_header


def raw_file(
    path: Path, header: bytes | object, data: bytes = b"", length: int | None = None
) -> Path:
    """A safetensors file from a header (an object, or raw JSON bytes) and data bytes."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    prefix = struct.pack("<Q", len(text) if length is None else length)
    path.write_bytes(prefix + text + data)
    return path


def f32(begin: int, count: int, shape: list[int] | None = None) -> dict[str, object]:
    """A header entry for `count` float32 values at byte `begin` of the data area."""
    return {"dtype": "F32", "shape": [count] if shape is None else shape,
            "data_offsets": [begin, begin + 4 * count]}  # fmt: skip


def refused(path: Path, *patterns: str) -> str:
    """The message SafetensorsSource refuses `path` with, checked to start with the path."""
    with pytest.raises(CheckpointError) as caught:
        SafetensorsSource(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    for pattern in patterns:
        assert pattern in message, (pattern, message)
    return message


def reference_accepts(path: Path) -> bool:
    """Whether the reference library opens `path` and reads every tensor."""
    try:
        with safe_open(str(path), "np") as file:
            for key in file.keys():  # noqa: SIM118 - safe_open has no __iter__
                file.get_tensor(key)
    except Exception:  # any refusal counts
        return False
    return True


# 1. Bounded parsing -----------------------------------------------------------------------


BOUNDS = {
    "deep_nesting": (b'{"w": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nests too deep"),
    "huge_integer_in_offsets": (
        b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, ' + b"9" * 5000 + b"]}}",
        "integer of 5000 digits (limit 20), in the entry of tensor 'w'; expected integers",
    ),
    "dim_2_70_next_to_zero": (
        {"w": {"dtype": "F32", "shape": [2**70, 0], "data_offsets": [0, 0]}},
        "integer of 22 digits (limit 20), in the entry of tensor 'w'",
    ),
    "dim_2_63_next_to_zero": (
        {"w": {"dtype": "F32", "shape": [2**63, 0], "data_offsets": [0, 0]}},
        "tensor 'w': dimension 9223372036854775808 is not an integer in [0, 2**62]",
    ),
    "rank_100": (
        {"w": {"dtype": "F32", "shape": [1] * 100, "data_offsets": [0, 4]}},
        "tensor 'w': rank 100 exceeds the limit of 16",
    ),
    "elements_past_int64": (
        {"w": {"dtype": "F64", "shape": [2**31, 2**31, 4], "data_offsets": [0, 0]}},
        "tensor 'w': shape [2147483648, 2147483648, 4] holds more than 2**62 elements",
    ),
    "elements_past_2_62": (
        {"w": {"dtype": "U8", "shape": [2**31, 2**31, 2], "data_offsets": [0, 2**63]}},
        "tensor 'w': shape [2147483648, 2147483648, 2] holds more than 2**62 elements",
    ),
    "float_dim": ({"w": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, "tensor 'w'"),
    "nan_offset": (
        b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, NaN]}}',
        "tensor 'w'",
    ),
}


@pytest.mark.parametrize("case", sorted(BOUNDS))
def test_unbounded_header_values_are_refused(tmp_path: Path, case: str) -> None:
    header, expected = BOUNDS[case]
    refused(raw_file(tmp_path / f"{case}.safetensors", header, bytes(4)), expected)


@pytest.mark.parametrize(
    ("length", "expected"),
    [(2**64 - 1, "exceeds the limit 100000000"), (99_000_000, "runs past the end of the file")],
)
def test_huge_header_lengths_are_refused_before_reading(
    tmp_path: Path, length: int, expected: str
) -> None:
    refused(raw_file(tmp_path / "m.safetensors", {}, length=length), expected)


def test_a_header_read_short_is_refused(tmp_path: Path) -> None:
    prefix = struct.pack("<Q", 64)
    with pytest.raises(
        CheckpointError, match=r"m\.safetensors: header cut short: read 2 of its 64"
    ):
        parse_header(prefix, lambda count: b"{}", 100, "m.safetensors")


# 2. Strict layout: the tensors cover the data area exactly -----------------------------------

LAYOUTS = {
    "gap_between": ({"a": f32(0, 2), "b": f32(12, 2)}, 20, "bytes [8, 12)", "before tensor 'b'"),
    "gap_before_first": ({"a": f32(4, 2)}, 12, "bytes [0, 4)", "before tensor 'a'"),
    "trailing_bytes": ({"a": f32(0, 2)}, 12, "4 bytes after the last tensor", "tensors end at 8"),
    "trailing_after_empty": ({}, 4, "4 bytes after the last tensor", "area of 4 bytes"),
    "overlap": ({"a": f32(0, 3), "b": f32(8, 2)}, 16, "tensors 'a' and 'b' overlap", "[8, 16]"),
    "same_bytes": ({"a": f32(0, 2), "b": f32(0, 2)}, 8, "overlap", "begin where the previous"),
    "zero_size_inside": ({"a": f32(0, 2), "z": f32(4, 0)}, 8, "'a' and 'z' overlap", "[4, 4]"),
    "zero_size_past_end": ({"a": f32(0, 2), "z": f32(100, 0)}, 8, "tensor 'z'", "outside"),
}


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_data_areas_not_covered_exactly_are_refused_like_the_reference(
    tmp_path: Path, case: str
) -> None:
    header, size, *expected = LAYOUTS[case]
    path = raw_file(tmp_path / f"{case}.safetensors", header, bytes(size))
    refused(path, *expected, "expected")
    assert not reference_accepts(path)


def test_zero_size_tensors_where_the_reference_takes_them_load_empty(tmp_path: Path) -> None:
    header = {"z0": f32(0, 0, [0, 5]), "a": f32(0, 2), "z8": f32(8, 0, [3, 0])}
    path = raw_file(tmp_path / "m.safetensors", header, np.float32([1, 2]).tobytes())
    assert reference_accepts(path)
    with SafetensorsSource(path) as source:
        assert source.load("z0").shape == (0, 5) and source.load("z8").shape == (3, 0)
        assert source.load("a").tolist() == [1.0, 2.0]


# 3. Names: unique after JSON decoding, no NUL, no lone surrogate --------------------------------

NAMES = {
    "duplicate": (b'{"w": {}, "w": {}}', "the key 'w' appears twice"),
    "duplicate_after_escapes": (
        b'{"w": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}, "\\u0077": {}}',
        "the key 'w' appears twice",
    ),
    "nul": (
        b'{"a\\u0000b": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}',
        "tensor name 'a\\x00b' contains a NUL character",
    ),
    "lone_surrogate": (
        b'{"a\\udce9": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}',
        "is not valid Unicode (a lone surrogate)",
    ),
    "surrogate_in_metadata": (
        b'{"__metadata__": {"k": "\\ud800"}}',
        "__metadata__ holds '\\ud800', which is not valid Unicode",
    ),
    "unknown_entry_key": (
        {"w": {**f32(0, 0), "strides": [1]}},
        "tensor 'w': expected keys dtype, shape, data_offsets",
    ),
}


@pytest.mark.parametrize("case", sorted(NAMES))
def test_bad_names_are_refused(tmp_path: Path, case: str) -> None:
    header, expected = NAMES[case]
    refused(raw_file(tmp_path / f"{case}.safetensors", header), expected)


# 4. Failures while loading name the file and the tensor -----------------------------------------


def two_tensor_file(path: Path) -> Path:
    header = {"a": f32(0, 4, [2, 2]), "b": f32(16, 64, [8, 8])}
    return raw_file(path, header, np.arange(68, dtype=np.float32).tobytes())


def test_a_file_truncated_after_opening_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    path = two_tensor_file(tmp_path / "m.safetensors")
    with SafetensorsSource(path) as source:
        with open(path, "r+b") as file:
            file.truncate(path.stat().st_size - 100)
        assert source.load("a").tolist() == [[0, 1], [2, 3]]
        for load in (lambda: source.load("b"), lambda: source.load_rows("b", 6, 8)):
            with pytest.raises(CheckpointError) as caught:
                load()
            message = str(caught.value)
            assert message.startswith(f"{path}: tensor 'b': ") and "truncated" in message


def test_an_mmap_failure_is_refused_naming_the_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = two_tensor_file(tmp_path / "m.safetensors")

    def failing_map(*args: object, **kwargs: object) -> None:
        raise OSError(12, "Cannot allocate memory")

    with SafetensorsSource(path) as source:
        monkeypatch.setattr(filemap, "guarded_map", failing_map)
        for load in (lambda: source.load("b"), lambda: source.load_rows("b", 0, 2)):
            with pytest.raises(CheckpointError, match="Cannot allocate memory") as caught:
                load()
            assert str(caught.value).startswith(f"{path}: tensor 'b': cannot map its bytes")


@pytest.mark.parametrize(("name", "expected"), [("a\x00", "NUL"), ("a\udce9", "lone surrogate")])
def test_the_writer_refuses_names_no_reader_could_take(name: str, expected: str) -> None:
    infos = [TensorInfo.of(name, (1,), "float32")]
    with pytest.raises(CheckpointError, match=expected) as caught:
        build_header(infos, path="out.safetensors")
    assert str(caught.value).startswith("out.safetensors: tensor name ")
