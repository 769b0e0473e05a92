"""Hostile and broken zip containers (.npz here; torch files share the reader): every one is a
CheckpointError naming the file, the member and what was expected, and nothing reaches DST."""

from __future__ import annotations

import re
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.errors import CheckpointError
from lazyparams.io import NpzSource, open_source
from lazyparams.io.zip_members import CHUNK_BYTES
from tests.io.rawzip import (
    DEFLATED,
    STORED,
    entry,
    npy_bytes,
    npy_header_bytes,
    write_zip,
)

WEIGHTS = np.arange(3 * 4096, dtype=np.float32).reshape(3, 4096)


def refused(path: Path, tmp_path: Path, pattern: str) -> str:
    """Convert `path`, expecting a CheckpointError matching `pattern` that names the file, and
    nothing at the destination."""
    dst = tmp_path / "out.safetensors"
    with pytest.raises(CheckpointError, match=pattern) as caught:
        convert("cast:float16", path, dst, progress=False)
    assert str(path) in str(caught.value)
    assert not dst.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("out")] == []
    return str(caught.value)


@pytest.mark.parametrize("method", [STORED, DEFLATED])
@pytest.mark.parametrize("delta", [-40, 40], ids=["short", "long"])
def test_member_not_matching_its_npy_header_is_refused(
    tmp_path: Path, method: int, delta: int
) -> None:
    data = npy_bytes(WEIGHTS)
    data = data[:delta] if delta < 0 else data + bytes(delta)
    path = write_zip(tmp_path / "m.npz", [entry("w.npy", data, method), entry("b.npy", data)])
    expected = WEIGHTS.nbytes
    refused(
        path, tmp_path, rf"\[w\.npy\]: {expected + delta} bytes of data after the \.npy header; "
        rf"expected {expected} for shape \[3, 4096\] of float32",
    )  # fmt: skip


def test_corrupt_deflate_stream_is_refused_on_load(tmp_path: Path) -> None:
    noisy = np.random.default_rng(0).standard_normal((3, 4096)).astype(np.float32)
    good = entry("w.npy", npy_bytes(noisy))
    data = bytearray(good.data)
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    path = write_zip(tmp_path / "m.npz", [replace(good, data=bytes(data))])
    with NpzSource(path) as source:
        assert source.info("w").shape == (3, 4096)
    refused(
        path,
        tmp_path,
        r"\[w\.npy\]: (corrupt deflate data|CRC-32|the deflate stream|inflates to more)",
    )


def test_wrong_crc_is_refused(tmp_path: Path) -> None:
    good = entry("w.npy", npy_bytes(WEIGHTS))
    path = write_zip(tmp_path / "m.npz", [replace(good, crc=good.crc ^ 1)])
    message = refused(path, tmp_path, r"\[w\.npy\]: CRC-32 [0-9a-f]{8} does not match")
    assert "the member is corrupt" in message


@pytest.mark.parametrize("rows", [False, True], ids=["whole", "rows"])
def test_a_flipped_byte_in_a_stored_member_is_refused_by_its_crc(
    tmp_path: Path, rows: bool
) -> None:
    """A stored member is mapped, not inflated: its CRC is still checked at the first read."""
    path = tmp_path / "m.npz"
    np.savez(path, w=WEIGHTS)
    data = bytearray(path.read_bytes())
    at = data.find(WEIGHTS[2].tobytes()[:64]) + 10
    data[at] ^= 0x40
    path.write_bytes(bytes(data))
    source = NpzSource(path)
    with pytest.raises(CheckpointError, match=r"\[w\.npy\]: CRC-32 .* the member is corrupt"):
        source.load_rows("w", 0, 1) if rows else source.load("w")
    source.close()


def test_stream_shorter_than_declared_is_refused(tmp_path: Path) -> None:
    raw = npy_bytes(WEIGHTS)
    short = entry("w.npy", raw[:-100])
    path = write_zip(tmp_path / "m.npz", [replace(short, size=len(raw), crc=zlib.crc32(raw))])
    expected = len(raw)
    refused(path, tmp_path, rf"\[w\.npy\]: the deflate stream ends after \d+ bytes; expected "
            rf"{expected}")  # fmt: skip


def test_stream_longer_than_declared_is_refused(tmp_path: Path) -> None:
    raw = npy_bytes(WEIGHTS)
    long = entry("w.npy", raw + bytes(CHUNK_BYTES))
    path = write_zip(tmp_path / "m.npz", [replace(long, size=len(raw), crc=zlib.crc32(raw))])
    refused(path, tmp_path, rf"\[w\.npy\]: inflates to more than its declared {len(raw)} bytes")


def test_declared_size_deflate_cannot_produce_is_refused_before_inflating(tmp_path: Path) -> None:
    header = npy_header_bytes((1 << 30,))
    bomb = entry("w.npy", header + bytes(1000))
    path = write_zip(tmp_path / "m.npz", [replace(bomb, size=len(header) + 4 * 10**8)])
    with pytest.raises(CheckpointError, match=r"\[w\.npy\]: \d+ compressed bytes declare \d+ "
                       r"inflated, more than deflate can produce"):  # fmt: skip
        NpzSource(path)


def test_shape_larger_than_member_is_refused_before_inflating(tmp_path: Path) -> None:
    header = npy_header_bytes((1 << 28,))  # 1 GiB declared by the header, 64 KiB by the zip
    path = write_zip(tmp_path / "m.npz", [entry("w.npy", header + bytes(1 << 16))])
    refused(path, tmp_path, r"\[w\.npy\]: 65536 bytes of data after the \.npy header; expected "
            r"1073741824 for shape \[268435456\]")  # fmt: skip


def test_duplicate_members_are_refused(tmp_path: Path) -> None:
    one, two = npy_bytes(WEIGHTS), npy_bytes(WEIGHTS + 1)
    path = write_zip(tmp_path / "m.npz", [entry("w.npy", one), entry("w.npy", two)])
    refused(path, tmp_path, r"m\.npz: member 'w\.npy' appears twice; expected unique members")


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        (b"a\x00b.npy", r"member name 'a\\x00b\.npy' contains a NUL"),
        (b"../x.npy", r"member name '\.\./x\.npy' is not a safe relative path"),
        (b"/abs.npy", r"member name '/abs\.npy' is not a safe relative path"),
        (b"a\\b.npy", r"is not a safe relative path"),
        (b"a//b.npy", r"member name 'a//b\.npy' is not a safe relative path"),
    ],
    ids=["nul", "dotdot", "absolute", "backslash", "empty_part"],
)
def test_nul_and_unsafe_member_names_are_refused(tmp_path: Path, name: bytes, pattern: str) -> None:
    path = write_zip(tmp_path / "m.npz", [entry(name, npy_bytes(WEIGHTS))])
    refused(path, tmp_path, pattern)


def test_members_overlapping_are_refused(tmp_path: Path) -> None:
    one, two = entry("a.npy", npy_bytes(WEIGHTS)), entry("b.npy", npy_bytes(WEIGHTS))
    path = write_zip(tmp_path / "m.npz", [replace(one, packed=len(one.data) + 40), two])
    refused(path, tmp_path, r"members 'a\.npy' and 'b\.npy' overlap .*expected disjoint members")


def test_member_data_past_the_end_is_refused(tmp_path: Path) -> None:
    one = entry("a.npy", npy_bytes(WEIGHTS))
    path = write_zip(tmp_path / "m.npz", [replace(one, packed=len(one.data) + 10**6)])
    refused(path, tmp_path, r"\[a\.npy\]: the member's \d+ bytes at \d+ run past the archive's "
            r"data, which ends at \d+")  # fmt: skip


def test_local_header_disagreeing_with_the_directory_is_refused(tmp_path: Path) -> None:
    one, two = entry("a.npy", npy_bytes(WEIGHTS)), entry("b.npy", npy_bytes(WEIGHTS))
    path = write_zip(tmp_path / "m.npz", [one, replace(two, offset=0)])
    refused(path, tmp_path, r"\[b\.npy\]: the local header disagrees with the central directory")


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"method": 14}, r"compression method 14; expected stored or deflate"),
        ({"method": 12}, r"compression method 12; expected stored or deflate"),
        ({"flags": 1}, r"the member is encrypted"),
    ],
    ids=["lzma", "bzip2", "encrypted"],
)
def test_other_methods_and_encryption_are_refused(
    tmp_path: Path, changes: dict[str, int], pattern: str
) -> None:
    path = write_zip(tmp_path / "m.npz", [replace(entry("w.npy", npy_bytes(WEIGHTS)), **changes)])
    refused(path, tmp_path, r"\[w\.npy\]: " + pattern)


@pytest.mark.parametrize("version", [0, 10, 45, 63])
def test_versions_up_to_6_3_are_read_by_their_method(tmp_path: Path, version: int) -> None:
    members = [entry("w.npy", npy_bytes(WEIGHTS), version=version)]
    path = write_zip(tmp_path / "m.npz", members)
    with open_source(path) as source:
        assert np.array_equal(source.load("w"), WEIGHTS)


def test_data_before_the_first_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.npz"
    np.savez(path, w=WEIGHTS)
    path.write_bytes(b"\xa5" * 7 + path.read_bytes())  # zipfile would skip it; numpy would not
    refused(path, tmp_path, r"m\.npz: not a readable \.npz archive: byte 0 holds a5a5a5a5; "
            r"expected a zip member's signature 504b0304")  # fmt: skip


def test_compressed_patched_data_is_refused(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "m.npz", [entry("w.npy", npy_bytes(WEIGHTS), flags=0x20)])
    refused(path, tmp_path, r"m\.npz\[w\.npy\]: the member is compressed patched data")


@pytest.mark.parametrize("version", [64, 99, 0xFFFF])
def test_later_zip_versions_are_refused(tmp_path: Path, version: int) -> None:
    members = [entry("w.npy", npy_bytes(WEIGHTS), version=version)]
    path = write_zip(tmp_path / "m.npz", members)
    refused(path, tmp_path, r"m\.npz: zip version [\d.]+ is needed to extract; expected at "
            r"most zip version 6\.3")  # fmt: skip


def test_every_truncation_is_refused_cleanly(tmp_path: Path) -> None:
    whole = write_zip(tmp_path / "whole.npz", [entry("a.npy", npy_bytes(WEIGHTS)),
                                               entry("b.npy", npy_bytes(WEIGHTS), STORED)])  # fmt: skip
    data = whole.read_bytes()
    for cut in sorted({1, 4, 22, 30, 64, len(data) // 3, len(data) // 2, len(data) - 23,
                       len(data) - 1}):  # fmt: skip
        path = tmp_path / f"cut{cut}.npz"
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match=re.escape(str(path))):
            convert("cast:float16", path, tmp_path / "out.safetensors", progress=False)
        assert not (tmp_path / "out.safetensors").exists()


@pytest.mark.parametrize("fortran", [False, True], ids=["c_order", "fortran_order"])
def test_rows_of_a_deflated_member_match_the_tensor(tmp_path: Path, fortran: bool) -> None:
    rng = np.random.default_rng(1)
    tensor = rng.standard_normal((40, 3, 700)).astype(np.float32)
    stored = np.asfortranarray(tensor) if fortran else tensor
    path = write_zip(tmp_path / "m.npz", [entry("w.npy", npy_bytes(stored))])
    with NpzSource(path) as source:
        assert source.read_buffer_bytes("w") > 0
        assert np.array_equal(source.load("w"), tensor)
        blocks = [(0, 7), (7, 20), (20, 40), (3, 5), (39, 40), (0, 40)]
        for start, stop in blocks:
            rows = source.load_rows("w", start, stop)
            assert np.array_equal(rows, tensor[start:stop]), (start, stop)
            assert not rows.flags.writeable


def test_a_deflated_npz_converts_in_blocks_within_the_budget(tmp_path: Path) -> None:
    path, weights = tmp_path / "m.npz", np.tile(WEIGHTS, (40, 1))  # 1.9 MiB
    np.savez_compressed(path, w=weights, v=weights[0])
    report = convert("cast:float16", path, tmp_path / "out.npz", budget="1MiB", progress=False)
    assert report.plan.chunked_outputs == ("w",)
    assert report.plan.read_buffer_bytes > 0
    assert report.predicted_peak_bytes <= 1 << 20
    with np.load(tmp_path / "out.npz") as out:
        assert np.array_equal(out["w"], weights.astype(np.float16))
