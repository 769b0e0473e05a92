"""GGUF key/value values read with bounds: types, lengths, nesting, booleans; each bad value
refused naming the file, the key (and item), the byte and what was expected."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from gguf import GGUFValue

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSource, read_gguf_metadata
from lazyparams.io.gguf_reader import read_gguf_header
from lazyparams.io.gguf_values import MAX_ARRAY_DEPTH, MAX_INNER_ARRAYS, plain
from tests.io.gguf_samples import (
    ARRAYS,
    SCALARS,
    T,
    kv_at,
    nested_array,
    patched,
    refused,
    with_pair,
    write_sample,
)


@pytest.fixture(name="sample")
def sample_fixture(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "m.gguf", tensors=False)


def test_every_value_type_reads_back_as_written(sample: Path) -> None:
    values = read_gguf_header(sample).values
    for key, (value, kind) in SCALARS.items():
        got = values[key]
        assert (got.type, got.sub_type) == (kind, None)
        assert repr(got.value) == repr(value if kind != T.FLOAT32 else 0.10000000149011612)
    for key, (items, sub) in ARRAYS.items():
        got = plain(values[key])
        assert got == GGUFValue(items, T.ARRAY, sub)
        assert [type(item) for item in got.value] == [type(item) for item in items]


@pytest.mark.parametrize("type_id", [13, 2**31, 2**32 - 1])
def test_an_unknown_value_type_is_refused(sample: Path, tmp_path: Path, type_id: int) -> None:
    where = kv_at(sample, "s.u16")
    bad = patched(sample, tmp_path / "bad.gguf", where["type"], "<I", type_id)
    refused(
        bad,
        f"metadata key 's.u16' at byte {where['type']}",
        f"the value type is {type_id}",
        "expected one of 0 (UINT8)",
    )


def test_an_unknown_array_item_type_is_refused(sample: Path, tmp_path: Path) -> None:
    where = kv_at(sample, "a.i32")
    bad = patched(sample, tmp_path / "bad.gguf", where["item_type"], "<I", 99)
    refused(bad, f"metadata key 'a.i32' at byte {where['item_type']}", "item type is 99")


def test_a_string_value_longer_than_the_file_is_refused(sample: Path, tmp_path: Path) -> None:
    where = kv_at(sample, "s.str")
    bad = patched(sample, tmp_path / "bad.gguf", where["value"], "<Q", 2**40)
    refused(
        bad,
        f"metadata key 's.str' at byte {where['value']}",
        f"the string value (a string) needs {2**40} bytes",
    )


@pytest.mark.parametrize(("key", "size"), [("a.i32", 4), ("a.f64", 8), ("a.bool", 1)])
def test_an_array_of_scalars_longer_than_the_file_is_refused(
    sample: Path, tmp_path: Path, key: str, size: int
) -> None:
    where = kv_at(sample, key)
    bad = patched(sample, tmp_path / "bad.gguf", where["count"], "<Q", 2**61)
    refused(bad, f"metadata key {key!r} at byte {where['items']}", f"needs {2**61 * size} bytes")


def test_an_array_of_strings_longer_than_the_file_is_refused_before_any_is_read(
    sample: Path, tmp_path: Path
) -> None:
    where = kv_at(sample, "a.str")
    count = sample.stat().st_size // 8 + 1  # each string takes at least its 8-byte length
    bad = patched(sample, tmp_path / "bad.gguf", where["count"], "<Q", count)
    refused(bad, "metadata key 'a.str' at byte", f"an array of {count} STRING items")


def test_a_string_item_longer_than_the_file_is_named_by_its_index(
    sample: Path, tmp_path: Path
) -> None:
    where = kv_at(sample, "a.str")
    third = where["items"] + 8 + 1 + 8  # past "a" and ""
    bad = patched(sample, tmp_path / "bad.gguf", third, "<Q", 2**33)
    refused(bad, f"metadata key 'a.str', item 2 at byte {third}", f"needs {2**33} bytes")


def test_a_file_cut_inside_a_value_is_refused_naming_the_key(sample: Path, tmp_path: Path) -> None:
    where = kv_at(sample, "a.f32")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(sample.read_bytes()[: where["items"] + 5])
    refused(bad, f"metadata key 'a.f32' at byte {where['items']}", "needs 12 bytes but 5 are")


@pytest.mark.parametrize(("key", "offset"), [("s.bool", 0), ("a.bool", 1)])
def test_a_bool_other_than_0_or_1_is_refused(
    sample: Path, tmp_path: Path, key: str, offset: int
) -> None:
    where = kv_at(sample, key)
    at = where.get("items", where["value"]) + offset
    bad = patched(sample, tmp_path / "bad.gguf", at, "B", 2)
    item = ", item 1" if offset else ""
    refused(bad, f"metadata key {key!r}{item} at byte {at}", "a BOOL byte of 2; expected 0 or 1")


def test_a_string_value_that_is_not_utf8_is_kept_as_bytes(sample: Path, tmp_path: Path) -> None:
    where = kv_at(sample, "s.str")
    raw = b"h\xffllo!"  # as long as "héllo" in UTF-8
    bad = patched(sample, tmp_path / "raw.gguf", where["value"] + 8, "6s", raw)
    assert read_gguf_metadata(bad)["s.str"] == GGUFValue(raw, T.STRING)


def test_an_empty_array_keeps_its_item_type(sample: Path, tmp_path: Path) -> None:
    empty = with_pair(sample, tmp_path / "e.gguf", "a.empty", struct.pack("<IIQ", 9, 5, 0))
    assert read_gguf_metadata(empty)["a.empty"] == GGUFValue([], T.ARRAY, T.INT32)


def test_nested_arrays_are_read_to_a_bounded_depth(sample: Path, tmp_path: Path) -> None:
    ok = with_pair(sample, tmp_path / "ok.gguf", "a.deep", nested_array(MAX_ARRAY_DEPTH))
    value = read_gguf_header(ok).values["a.deep"]
    for _ in range(MAX_ARRAY_DEPTH - 1):
        assert value.sub_type == T.ARRAY and len(value.value) == 1
        value = value.value[0]
    assert plain(value) == GGUFValue([7], T.ARRAY, T.INT32)
    with pytest.raises(CheckpointError, match=r"'a\.deep': nested arrays are not supported"):
        read_gguf_metadata(ok)
    deep = with_pair(sample, tmp_path / "deep.gguf", "a.deep", nested_array(MAX_ARRAY_DEPTH + 1))
    refused(
        deep,
        "metadata key 'a.deep', item 0, item 0, item 0",
        f"arrays nested {MAX_ARRAY_DEPTH + 1} deep; expected at most {MAX_ARRAY_DEPTH}",
    )


def test_a_file_with_nested_arrays_still_opens_as_a_source(tmp_path: Path) -> None:
    sample = write_sample(tmp_path / "m.gguf", n__ested=([[1, 2], [3]], T.ARRAY, T.ARRAY))
    with GGUFSource(sample) as source:
        assert source.names()[0] == "tok_embd.weight"


def test_an_array_of_arrays_longer_than_the_file_is_refused(sample: Path, tmp_path: Path) -> None:
    count = sample.stat().st_size // 12 + 1  # an inner array takes at least 12 bytes
    value = struct.pack("<IIQ", T.ARRAY, T.ARRAY, count)
    bad = with_pair(sample, tmp_path / "bad.gguf", "a.many", value)
    refused(bad, "metadata key 'a.many'", f"an array of {count} ARRAY items")


def test_arrays_inside_arrays_are_bounded_per_file(sample: Path, tmp_path: Path) -> None:
    count = MAX_INNER_ARRAYS + 1
    value = struct.pack("<IIQ", T.ARRAY, T.ARRAY, count) + struct.pack("<IQ", T.INT8, 0) * count
    bad = with_pair(sample, tmp_path / "bad.gguf", "a.wide", value)
    refused(bad, "metadata key 'a.wide'", f"{count} arrays inside arrays", f"at most {count - 1}")


def test_one_flipped_type_byte_is_refused_at_once(tmp_path: Path) -> None:
    # a string's value type flipped to ARRAY: its length and text are read as an array header
    sample = write_sample(tmp_path / "m.gguf")
    where = kv_at(sample, "general.architecture")
    bad = patched(sample, tmp_path / "bad.gguf", where["type"], "B", T.ARRAY)
    refused(bad, f"metadata key 'general.architecture' at byte {where['value'] + 12}", "items")
