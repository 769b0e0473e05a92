"""GGUFSink(metadata=...): typing rules, order, alignment, bad input; read_gguf_metadata round trips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValue, GGUFWriter
from gguf import GGUFValueType as T

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSink, TensorInfo
from lazyparams.io.gguf_metadata import check_gguf_metadata, read_gguf_metadata, typed_value

WEIGHT = np.arange(12, dtype=np.float32).reshape(3, 4)


def write(path: Path, metadata: Any, **options: Any) -> Path:
    with GGUFSink(path, [TensorInfo.from_array("w", WEIGHT)], metadata=metadata, **options) as sink:
        sink.write("w", WEIGHT)
    return path


def fields(path: Path) -> dict[str, tuple[list[str], Any]]:
    """key -> (type names, contents) as gguf's own reader sees them, header fields left out."""
    reader = GGUFReader(path)
    return {
        key: ([t.name for t in f.types], f.contents())
        for key, f in reader.fields.items()
        if not key.startswith("GGUF.")
    }


PLAIN_RULES = [
    ("a.str", "text", ["STRING"], "text"),
    ("a.true", True, ["BOOL"], True),
    ("a.small", 4096, ["UINT32"], 4096),
    ("a.u32max", 2**32 - 1, ["UINT32"], 2**32 - 1),
    ("a.big", 2**32, ["INT64"], 2**32),
    ("a.negative", -1, ["INT64"], -1),
    ("a.huge", 2**63, ["UINT64"], 2**63),
    ("a.float", 0.5, ["FLOAT32"], 0.5),
    ("a.numpy_int", np.int16(3), ["UINT32"], 3),
    ("a.ints", [1, 2, 3], ["ARRAY", "UINT32"], [1, 2, 3]),
    ("a.signed", [1, -2], ["ARRAY", "INT64"], [1, -2]),
    ("a.mixed", [1, 0.25], ["ARRAY", "FLOAT32"], [1.0, 0.25]),
    ("a.strs", ("x", "yz"), ["ARRAY", "STRING"], ["x", "yz"]),
    ("a.bools", [True, False], ["ARRAY", "BOOL"], [True, False]),
]


@pytest.mark.parametrize(("key", "value", "types", "contents"), PLAIN_RULES)
def test_plain_values_are_typed_by_the_documented_rules(
    tmp_path: Path, key: str, value: Any, types: list[str], contents: Any
) -> None:
    got = fields(write(tmp_path / "m.gguf", {key: value}))
    assert got[key] == (types, contents)


EXACT = [
    GGUFValue(200, T.UINT8),
    GGUFValue(-100, T.INT8),
    GGUFValue(60000, T.UINT16),
    GGUFValue(-30000, T.INT16),
    GGUFValue(4000000000, T.UINT32),
    GGUFValue(-2000000000, T.INT32),
    GGUFValue(2**64 - 1, T.UINT64),
    GGUFValue(-(2**63), T.INT64),
    GGUFValue(0.1, T.FLOAT64),
    GGUFValue(False, T.BOOL),
    GGUFValue("ü ok", T.STRING),
    GGUFValue([1, 2], T.ARRAY, T.UINT8),
    GGUFValue([-1.5, 2.0], T.ARRAY, T.FLOAT64),
    GGUFValue([7, 8], T.ARRAY),  # sub_type as gguf's writer gives ints: INT32
]


def test_exact_types_round_trip_through_gguf_and_read_metadata(tmp_path: Path) -> None:
    metadata = {f"t.{i}": value for i, value in enumerate(EXACT)}
    path = write(tmp_path / "m.gguf", metadata)
    got = fields(path)
    for key, value in metadata.items():
        inner = T.INT32 if value.sub_type is None else value.sub_type  # UINT8 is 0, falsy
        sub = [] if value.type != T.ARRAY else [inner.name]
        assert got[key] == ([value.type.name, *sub], value.value)
    back = read_gguf_metadata(path)
    assert back.pop("general.architecture") == GGUFValue("unknown", T.STRING)
    assert back == {k: typed_value(k, v) for k, v in metadata.items()}


def test_float32_is_stored_as_float32(tmp_path: Path) -> None:
    got = fields(write(tmp_path / "m.gguf", {"eps": 1e-5}))
    assert got["eps"] == (["FLOAT32"], float(np.float32(1e-5)))


def test_architecture_first_then_the_given_order(tmp_path: Path) -> None:
    metadata = {"z.last": 1, "general.architecture": "llama", "a.first": "x", "m.mid": 2.0}
    path = write(tmp_path / "m.gguf", metadata)
    assert list(fields(path)) == ["general.architecture", "z.last", "a.first", "m.mid"]
    assert list(read_gguf_metadata(path)) == list(fields(path))


def test_arch_argument_names_the_architecture_when_metadata_does_not(tmp_path: Path) -> None:
    path = write(tmp_path / "m.gguf", {"general.name": "n"}, arch="qwen2")
    assert next(iter(fields(path).items())) == ("general.architecture", (["STRING"], "qwen2"))


def test_same_bytes_as_the_gguf_writer_given_the_same_pairs(tmp_path: Path) -> None:
    ours = write(
        tmp_path / "ours.gguf",
        {"general.architecture": "llama", "llama.block_count": 2, "general.name": "m"},
    )
    writer = GGUFWriter(tmp_path / "ref.gguf", "llama")
    writer.add_uint32("llama.block_count", 2)
    writer.add_string("general.name", "m")
    writer.add_tensor("w", WEIGHT)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert ours.read_bytes() == (tmp_path / "ref.gguf").read_bytes()


def test_general_alignment_sets_the_data_alignment(tmp_path: Path) -> None:
    infos = [TensorInfo.from_array("a", WEIGHT[:1, :1]), TensorInfo.from_array("w", WEIGHT)]
    path = tmp_path / "m.gguf"
    with GGUFSink(path, infos, metadata={"general.alignment": 256}) as sink:
        sink.write("a", WEIGHT[:1, :1])
        sink.write("w", WEIGHT)
    reader = GGUFReader(path)
    assert reader.alignment == 256
    assert all(t.data_offset % 256 == 0 for t in reader.tensors)
    assert np.array_equal(reader.tensors[1].data, WEIGHT)


BAD = [
    ({1: "x"}, "1", "non-empty string"),
    ({"": "x"}, "''", "non-empty string"),
    ({"split.count": 2}, "split.count", "written by the file format"),
    ({"GGUF.version": 3}, "GGUF.version", "written by the file format"),
    ({"k.none": None}, "k.none", "expected a gguf.GGUFValue, str, bool"),
    ({"k.nested": [[1], [2]]}, "k.nested", "not nested lists"),
    ({"k.empty": []}, "k.empty", "non-empty list"),
    ({"k.mixed": ["a", 1]}, "k.mixed", "items of one type"),
    ({"k.huge": 2**64}, "k.huge", "within [-2**63, 2**64)"),
    ({"k.u8": GGUFValue(300, T.UINT8)}, "k.u8", "UINT8 in [0, 255]"),
    ({"k.i": GGUFValue(1.5, T.UINT32)}, "k.i", "expected a UINT32 value"),
    ({"k.b": GGUFValue(1, T.BOOL)}, "k.b", "expected a BOOL value"),
    ({"k.f": GGUFValue(1e39, T.FLOAT32)}, "k.f", "FLOAT32 within"),
    ({"k.t": GGUFValue(1, 4)}, "k.t", "GGUFValueType as the type"),
    ({"k.a": GGUFValue([1], T.ARRAY, T.ARRAY)}, "k.a", "no nested arrays"),
    ({"k.s": GGUFValue("x", T.STRING, T.UINT8)}, "k.s", "has no sub_type"),
    ({"general.architecture": 5}, "general.architecture", "STRING"),
    ({"general.alignment": 48}, "general.alignment", "UINT32 power of two"),
    ({"general.alignment": GGUFValue(64, T.UINT64)}, "general.alignment", "UINT32 power of two"),
]


@pytest.mark.parametrize(("metadata", "culprit", "expected"), BAD)
def test_bad_metadata_is_refused_before_anything_is_written(
    tmp_path: Path, metadata: Any, culprit: str, expected: str
) -> None:
    with pytest.raises(CheckpointError) as caught:
        write(tmp_path / "out" / "m.gguf", metadata)
    message = str(caught.value)
    assert str(tmp_path / "out" / "m.gguf") in message
    assert culprit in message and expected in message
    assert list(tmp_path.iterdir()) == []


def test_metadata_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="expected a mapping of key -> value, got list"):
        write(tmp_path / "m.gguf", [("a", 1)])
    assert list(tmp_path.iterdir()) == []


def test_architecture_given_twice_must_agree(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="'llama' but arch is 'qwen2'"):
        check_gguf_metadata({"general.architecture": "llama"}, arch="qwen2")
    assert check_gguf_metadata({"general.architecture": "llama"}, arch="llama").arch == "llama"


def test_read_metadata_keeps_split_keys_only_when_asked(tmp_path: Path) -> None:
    writer = GGUFWriter(tmp_path / "m.gguf", "llama")
    writer.add_uint16("split.count", 1)
    writer.add_array("tokenizer.ggml.scores", [0.5, -1.0])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    plain = read_gguf_metadata(tmp_path / "m.gguf")
    assert list(plain) == ["general.architecture", "tokenizer.ggml.scores"]
    assert plain["tokenizer.ggml.scores"] == GGUFValue([0.5, -1.0], T.ARRAY, T.FLOAT32)
    assert "split.count" in read_gguf_metadata(tmp_path / "m.gguf", include_split=True)


def test_read_metadata_of_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(CheckpointError, match=r"x\.gguf: not a readable GGUF file"):
        read_gguf_metadata(tmp_path / "x.gguf")
