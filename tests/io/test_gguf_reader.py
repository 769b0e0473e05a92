"""The bounded GGUF header reader: magic, version, counts, keys, alignment, files that are not
files; each bad header refused with the file, the culprit, the byte and what was expected."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from lazyparams.engine import convert
from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSource, read_gguf_metadata
from lazyparams.io.gguf_reader import MIN_KV_BYTES, read_gguf_header
from lazyparams.io.gguf_tensors import MIN_TENSOR_BYTES
from tests.io.gguf_samples import (
    TENSORS,
    T,
    kv_at,
    patched,
    refused,
    spliced,
    write_sample,
)


@pytest.fixture(name="sample")
def sample_fixture(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "m.gguf")


def test_a_valid_file_is_read_whole(sample: Path) -> None:
    header = read_gguf_header(sample)
    assert header.version == 3 and header.byte_order == "<" and header.alignment == 32
    assert [t.name for t in header.tensors] == list(TENSORS)
    assert header.tensors[0].offset == header.data_offset
    with GGUFSource(sample) as source:
        for name, (array, _) in TENSORS.items():
            got = source.load(name)
            assert got.tobytes() == array.tobytes(), name


def test_a_wrong_magic_is_refused(sample: Path, tmp_path: Path) -> None:
    bad = patched(sample, tmp_path / "bad.gguf", 0, "4s", b"GGUG")
    refused(bad, "the file header at byte 0", "the magic is b'GGUG'", "expected b'GGUF'")


@pytest.mark.parametrize("version", [0, 1, 4, 256, 0x00050000])
def test_a_version_other_than_2_or_3_is_refused(sample: Path, tmp_path: Path, version: int) -> None:
    bad = patched(sample, tmp_path / "bad.gguf", 4, "<I", version)
    shown = 0x0500 if version == 0x00050000 else version  # read in the other byte order
    refused(bad, "the file header at byte 4", f"version {shown}", "expected version 2 or 3")


@pytest.mark.parametrize(
    ("at", "count"), [(8, 2**64 - 1), (16, 2**40), (8, MIN_TENSOR_BYTES), (16, MIN_KV_BYTES)]
)
def test_counts_the_file_cannot_hold_are_refused_before_reading_on(
    sample: Path, tmp_path: Path, at: int, count: int
) -> None:
    if count < 100:  # just more than the file's bytes could hold at `count` bytes each
        count = sample.stat().st_size // count + 1
    bad = patched(sample, tmp_path / "bad.gguf", at, "<Q", count)
    refused(bad, "the file header at byte 8", f"{count} ", "need at least", "can hold")


def test_a_key_length_past_the_end_is_refused(sample: Path, tmp_path: Path) -> None:
    start = kv_at(sample, "s.u8")["start"]
    bad = patched(sample, tmp_path / "bad.gguf", start, "<Q", 2**63)
    refused(
        bad, "key/value pair 1 at byte", f"byte {start}", f"the key (a string) needs {2**63} bytes"
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [(b"s.\xff8", "is not valid UTF-8"), (b"s.\x008", "contains a NUL character")],
)
def test_a_key_that_is_not_clean_text_is_refused(
    sample: Path, tmp_path: Path, key: bytes, message: str
) -> None:
    start = kv_at(sample, "s.u8")["start"]
    bad = patched(sample, tmp_path / "bad.gguf", start + 8, "4s", key)
    refused(bad, f"key/value pair 1 at byte {start}", message)


def test_an_empty_key_is_refused(tmp_path: Path) -> None:
    sample = write_sample(tmp_path / "m.gguf", tensors=False)
    start = kv_at(sample, "s.u8")["start"]
    bad = spliced(sample, tmp_path / "bad.gguf", start, 12, struct.pack("<Q", 0))
    refused(bad, f"key/value pair 1 at byte {start}", "the key is empty")


def test_a_repeated_key_is_refused(sample: Path, tmp_path: Path) -> None:
    first, second = kv_at(sample, "s.u8")["start"], kv_at(sample, "s.i8")["start"]
    bad = patched(sample, tmp_path / "bad.gguf", second + 8, "4s", b"s.u8")
    refused(bad, f"metadata key 's.u8' at byte {second}", f"first at byte {first}")


@pytest.mark.parametrize("alignment", [0, 3, 48])
def test_an_alignment_that_is_not_a_power_of_two_is_refused(tmp_path: Path, alignment: int) -> None:
    sample = write_sample(tmp_path / "m.gguf", alignment=64)
    where = kv_at(sample, "general.alignment")
    bad = patched(sample, tmp_path / "bad.gguf", where["value"], "<I", alignment)
    refused(
        bad, f"metadata key 'general.alignment' at byte {where['start']}", f"UINT32 {alignment}"
    )


def test_an_alignment_of_another_type_is_refused(tmp_path: Path) -> None:
    bad = write_sample(tmp_path / "bad.gguf", tensors=False, general__alignment=(64, T.INT32))
    refused(bad, "metadata key 'general.alignment'", "is INT32 64", "expected a UINT32")


def test_a_custom_alignment_places_the_data(tmp_path: Path) -> None:
    header = read_gguf_header(write_sample(tmp_path / "m.gguf", alignment=256))
    assert header.alignment == 256
    assert all(t.offset % 256 == 0 for t in header.tensors)


@pytest.mark.parametrize("size", [0, 3, 6, 23])
def test_a_file_cut_inside_the_first_bytes_is_refused(
    sample: Path, tmp_path: Path, size: int
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(sample.read_bytes()[:size])
    refused(bad, "the file header at byte", "are left in the file", "needs")


def test_a_folder_a_pipe_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.gguf")
    (tmp_path / "dir.gguf").mkdir()
    for name, message in [
        ("pipe.gguf", "not a regular file"),
        ("dir.gguf", "not a regular file"),
        ("none.gguf", "cannot open: No such file or directory"),
    ]:
        with pytest.raises(CheckpointError) as err:
            read_gguf_header(tmp_path / name)
        assert str(err.value) == f"{tmp_path / name}: not a readable GGUF file: {message}"


def test_a_big_endian_file_gives_its_metadata_but_no_tensors(tmp_path: Path) -> None:
    little = read_gguf_metadata(write_sample(tmp_path / "le.gguf"))
    big_file = write_sample(tmp_path / "be.gguf", big_endian=True)
    big = read_gguf_metadata(big_file)
    assert list(big) == list(little)
    for key, value in little.items():
        other = big[key]
        assert (other.type, other.sub_type) == (value.type, value.sub_type)
        assert repr(other.value) == repr(value.value), key  # nan compares by its repr
    assert [t.shape for t in read_gguf_header(big_file).tensors] == [
        (*a.shape[:-1], a.shape[-1] // 34 * 32) if raw else a.shape for a, raw in TENSORS.values()
    ]
    with pytest.raises(CheckpointError, match=r"be\.gguf: byte-swapped \(big-endian\) GGUF"):
        GGUFSource(big_file)


def test_a_hostile_source_leaves_nothing_at_the_destination(sample: Path, tmp_path: Path) -> None:
    bad = patched(sample, tmp_path / "bad.gguf", kv_at(sample, "a.str")["count"], "<Q", 2**62)
    before = sorted(tmp_path.iterdir())
    with pytest.raises(CheckpointError, match=r"metadata key 'a\.str'"):
        convert("cast:float16", bad, tmp_path / "out.safetensors", progress=False)
    assert sorted(tmp_path.iterdir()) == before
