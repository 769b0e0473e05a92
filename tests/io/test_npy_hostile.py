"""Hostile .npy headers and folders: bounded header reads, shapes through io.limits, data that
is not what the header declares, and links out of the folder. Each is a CheckpointError naming
the file and what was expected, with nothing left at DST."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.errors import CheckpointError
from lazyparams.io import NpyFolderSource, open_source
from lazyparams.io.npy_format import MAX_HEADER_BYTES
from tests.io.rawzip import npy_bytes, npy_header_bytes

WEIGHTS = np.arange(12, dtype=np.float32).reshape(3, 4)


def refused(folder: Path, tmp_path: Path, pattern: str) -> str:
    dst = tmp_path / "out.safetensors"
    with pytest.raises(CheckpointError, match=pattern) as caught:
        convert("cast:float16", folder, dst, progress=False)
    assert not dst.exists()
    return str(caught.value)


def folder_with(tmp_path: Path, data: bytes, name: str = "w.npy") -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    (folder / "ok.npy").write_bytes(npy_bytes(WEIGHTS))
    return folder


def raw_header(text: str, version: int = 1) -> bytes:
    body = text.encode("latin-1")
    field = struct.pack("<H" if version == 1 else "<I", len(body))
    return b"\x93NUMPY" + bytes([version, 0]) + field + body


@pytest.mark.parametrize("version", [1, 2])
def test_a_header_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, version: int) -> None:
    size = 60_000 if version == 1 else 1 << 20
    data = raw_header("{" + " " * (size - 2) + "}", version)
    folder = folder_with(tmp_path, data)
    refused(folder, tmp_path, rf"w\.npy: \.npy header of {size} bytes; expected at most "
            rf"{MAX_HEADER_BYTES}")  # fmt: skip


@pytest.mark.parametrize(
    ("header", "pattern"),
    [
        ("(" * 3000 + ")" * 3000, r"not a readable \.npy header: brackets nest too deep \(at byte 210\)"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",)}",
         r"not a readable \.npy header: an integer of 5000 digits at byte 61"),
        ("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", r"not a readable \.npy header: 'fortran_order' is not True or False"),
        ("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", r"object arrays need pickle"),
        ("[1, 2]", r"not a readable \.npy header: the header is a list, not a dict"),
        ("{'descr': x, 'fortran_order': False, 'shape': (2,)}", r"not a readable \.npy header: byte 20 holds a name, where a header holds only literals"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 'a')}", r"not a readable \.npy header: 'shape' holds a str; expected a tuple of ints"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,),", r"not a readable \.npy header: a syntax error at byte \d+"),
        ("{'descr': '<f4', 'shape': (2,)}", r"not a readable \.npy header: the header's keys are 'descr', 'shape'; expected exactly"),
        ("{'descr': 'x9', 'fortran_order': False, 'shape': (2,)}", r"not a readable \.npy header: 'descr' does not describe a dtype"),
    ],
    ids=["deep_nesting", "5000_digit_dim", "fortran_int", "object", "not_a_dict", "a_name",
         "shape_of_str", "unclosed", "missing_key", "bad_descr"],
)  # fmt: skip
def test_malformed_header_dicts_are_refused(tmp_path: Path, header: str, pattern: str) -> None:
    folder = folder_with(tmp_path, raw_header(header))
    refused(folder, tmp_path, rf"w\.npy: {pattern}")


@pytest.mark.parametrize(
    ("shape", "pattern"),
    [
        ((2**70, 0), r"dimension 1180591620717411303424 is not an integer in \[0, 2\*\*62\]"),
        ((-1,), r"dimension -1 is not an integer"),
        ((True, 2), r"dimension True is not an integer"),
        ((1,) * 17, r"rank 17 exceeds the limit of 16"),
        (
            (2**31, 2**31, 2**31),
            r"shape \[2147483648, 2147483648, 2147483648\] holds more than 2\*\*62 elements",
        ),
    ],
    ids=["huge_next_to_zero", "negative", "bool", "rank17", "too_many_elements"],
)
def test_shapes_are_bounded_by_io_limits(tmp_path: Path, shape: tuple, pattern: str) -> None:
    text = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape!r}, }}"
    folder = folder_with(tmp_path, raw_header(text))
    refused(folder, tmp_path, rf"w\.npy: {pattern}")


@pytest.mark.parametrize("delta", [-4, 4], ids=["short", "long"])
def test_data_other_than_the_header_declares_is_refused(tmp_path: Path, delta: int) -> None:
    data = npy_bytes(WEIGHTS)
    folder = folder_with(tmp_path, data[:delta] if delta < 0 else data + bytes(delta))
    refused(folder, tmp_path, rf"w\.npy: {48 + delta} bytes of data after the \.npy header; "
            r"expected 48 for shape \[3, 4\] of float32")  # fmt: skip


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"\x93NUMPY\x03\x00" + bytes(8), r"\.npy version 3\.0; expected 1\.0 or 2\.0"),
        (b"PK\x03\x04" + bytes(20), r"not a \.npy array \(no \.npy magic bytes\)"),
        (b"\x93NUMPY\x01\x00\xff", r"the \.npy header is truncated"),
        (npy_header_bytes((3, 4))[:-5], r"the \.npy header is truncated"),
    ],
    ids=["version3", "no_magic", "cut_length", "cut_header"],
)
def test_other_versions_and_cut_headers_are_refused(
    tmp_path: Path, data: bytes, pattern: str
) -> None:
    refused(folder_with(tmp_path, data), tmp_path, rf"w\.npy: {pattern}")


def test_fortran_ordered_files_are_read(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, npy_bytes(np.asfortranarray(WEIGHTS)))
    with open_source(folder) as source:
        assert np.array_equal(source.load("w"), WEIGHTS)
        assert np.array_equal(source.load_rows("w", 1, 3), WEIGHTS[1:3])


def test_a_file_changed_after_listing_is_refused(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, npy_bytes(WEIGHTS))
    with NpyFolderSource(folder) as source:
        (folder / "w.npy").write_bytes(npy_bytes(WEIGHTS[:2]))
        with pytest.raises(CheckpointError, match=r"w\.npy: changed since it was listed"):
            source.load("w")


def outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "x.npy").write_bytes(npy_bytes(WEIGHTS))
    return outside


def test_a_linked_file_outside_the_folder_is_refused_unless_allowed(tmp_path: Path) -> None:
    outside = outside_file(tmp_path)
    folder = folder_with(tmp_path, npy_bytes(WEIGHTS))
    os.symlink(outside / "x.npy", folder / "linked.npy")
    message = refused(folder, tmp_path, r"'linked\.npy' resolves to .*elsewhere/x\.npy, outside "
                      r"the checkpoint folder")  # fmt: skip
    assert "--allow-outside-links" in message
    with NpyFolderSource(folder, allow_outside_links=True) as source:
        assert np.array_equal(source.load("linked"), WEIGHTS)


def test_a_linked_subfolder_outside_the_folder_is_refused_unless_allowed(tmp_path: Path) -> None:
    outside = outside_file(tmp_path)
    folder = folder_with(tmp_path, npy_bytes(WEIGHTS))
    os.symlink(outside, folder / "sub")
    refused(folder, tmp_path, r"'sub' resolves to .*elsewhere, outside the checkpoint folder")
    with NpyFolderSource(folder, allow_outside_links=True) as source:
        assert "sub/x" in source.names()


def test_links_inside_the_folder_are_followed_once(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, npy_bytes(WEIGHTS))
    (folder / "real").mkdir()
    (folder / "real" / "r.npy").write_bytes(npy_bytes(WEIGHTS))
    os.symlink(folder, folder / "real" / "loop")  # back to the top: never entered again
    os.symlink(folder / "real" / "r.npy", folder / "alias.npy")
    with NpyFolderSource(folder) as source:
        assert source.names() == ["alias", "ok", "real/r", "w"]
        assert np.array_equal(source.load("alias"), WEIGHTS)


def test_a_dtype_tag_file_nested_too_deep_is_refused(tmp_path: Path) -> None:
    folder = folder_with(tmp_path, npy_bytes(WEIGHTS))
    (folder / "dtypes.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(folder, tmp_path, r"dtypes\.json: the dtype tags nests too deep")
