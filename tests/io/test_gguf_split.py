"""Split GGUF: llama.cpp's part layout written by GGUFSink, read back whole, refused when broken."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

from lazyparams.errors import CheckpointError
from lazyparams.io import (
    GGUFSink,
    GGUFSource,
    GGUFSplitSource,
    TensorInfo,
    check_gguf_metadata,
    open_sink,
    open_source,
    plan_gguf_parts,
)

# 32-byte multiples, so gguf's writer (which sums unpadded sizes) cuts where the sink does
TENSORS = {f"blk.{i}.w": np.full((i + 1, 8), i, np.float32) for i in range(6)}
METADATA = {"general.name": "split test", "llama.block_count": 6}


def part(folder: Path, k: int, n: int = 5) -> Path:
    return folder / f"m-{k:05d}-of-{n:05d}.gguf"


def write_split(folder: Path, tensors: dict[str, Any] = TENSORS, size: int = 100) -> GGUFSink:
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    with GGUFSink(folder / "m.gguf", infos, metadata=METADATA, arch="llama", shard_size=size) as s:
        for name in reversed(tensors):
            s.write(name, tensors[name])
    return s


@pytest.fixture(name="split")
def split_fixture(tmp_path: Path) -> Path:
    write_split(tmp_path / "out")
    return tmp_path / "out"


def keys(path: Path) -> list[tuple[str, str, Any]]:
    reader = GGUFReader(path)
    return [
        (key, f.types[0].name, f.contents())
        for key, f in reader.fields.items()
        if not key.startswith("GGUF.")
    ]


def test_parts_are_named_and_keyed_as_llama_cpp_writes_them(split: Path) -> None:
    assert sorted(p.name for p in split.iterdir()) == [part(split, k).name for k in range(1, 6)]
    split_keys = [("split.count", "UINT16", 5), ("split.tensors.count", "INT32", 6)]
    assert keys(part(split, 1)) == [
        ("general.architecture", "STRING", "llama"),
        ("general.name", "STRING", "split test"),
        ("llama.block_count", "UINT32", 6),
        ("split.no", "UINT16", 0),
        *split_keys,
    ]
    for k in range(2, 6):
        assert keys(part(split, k)) == [("split.no", "UINT16", k - 1), *split_keys]


def test_parts_keep_tensor_order_and_stay_within_the_size(split: Path) -> None:
    names = []
    for k in range(1, 6):
        tensors = GGUFReader(part(split, k)).tensors
        assert sum(t.n_bytes for t in tensors) <= 100 or len(tensors) == 1
        names += [t.name for t in tensors]
    assert names == list(TENSORS)


def test_same_bytes_as_the_gguf_writer_splitting_the_same_model(
    split: Path, tmp_path: Path
) -> None:
    (tmp_path / "ref").mkdir()
    writer = GGUFWriter(tmp_path / "ref" / "m.gguf", "llama", split_max_size=100)
    writer.add_string("general.name", "split test")
    writer.add_uint32("llama.block_count", 6)
    for name, array in TENSORS.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for k in range(1, 6):
        assert part(split, k).read_bytes() == part(tmp_path / "ref", k).read_bytes()


def test_a_tensor_larger_than_the_size_gets_a_part_of_its_own() -> None:
    infos = [TensorInfo.of(n, (s,), "float32") for n, s in [("a", 8), ("big", 64), ("c", 8)]]
    parts = plan_gguf_parts(Path("m.gguf"), infos, 64, check_gguf_metadata(None))
    assert [[i.name for i in p.infos] for p in parts] == [["a"], ["big"], ["c"]]


def test_everything_within_the_size_is_one_plain_file(tmp_path: Path) -> None:
    write_split(tmp_path, size=10**6)
    assert [p.name for p in tmp_path.iterdir()] == ["m.gguf"]
    assert "split.count" not in dict((k, v) for k, _, v in keys(tmp_path / "m.gguf"))


def test_too_many_parts_are_refused_before_writing(tmp_path: Path) -> None:
    infos = [TensorInfo.of(f"t{i}", (8,), "float32") for i in range(65536)]
    with pytest.raises(CheckpointError, match="65536 parts needed; a split GGUF has at most 65535"):
        GGUFSink(tmp_path / "m.gguf", infos, shard_size=32)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("which", ["first", "second", "last", "folder"])
def test_any_part_or_the_folder_reads_every_tensor_byte_identical(split: Path, which: str) -> None:
    given = {"first": part(split, 1), "second": part(split, 2), "last": part(split, 5)}
    with open_source(given.get(which, split)) as source:
        assert isinstance(source, GGUFSplitSource)
        assert source.names() == list(TENSORS)
        for name, want in TENSORS.items():
            assert source.info(name) == TensorInfo.from_array(name, want)
            assert source.load(name).tobytes() == want.tobytes()
            assert source.load_rows(name, 0, 1).tobytes() == want[:1].tobytes()
        assert source.weight_map["blk.5.w"] == part(split, 5).name


def test_a_part_alone_is_refused_by_the_single_file_source(split: Path) -> None:
    with pytest.raises(CheckpointError, match="part 2 of 5 of a split GGUF; expected it opened"):
        GGUFSource(part(split, 2))


def test_a_missing_part_is_named(split: Path) -> None:
    part(split, 3).unlink()
    for given in (part(split, 1), split):
        with pytest.raises(CheckpointError, match=r"part m-00003-of-00005\.gguf is missing"):
            open_source(given)


def test_a_part_of_another_set_is_refused(split: Path, tmp_path: Path) -> None:
    other = {name: array for name, array in list(TENSORS.items())[:5]}
    write_split(tmp_path / "other", other, size=64)  # 5 tensors in 5 parts
    shutil.copy(part(tmp_path / "other", 4), part(split, 4))
    with pytest.raises(
        CheckpointError,
        match=r"m-00004-of-00005\.gguf: has split\.no 3 .*"
        r"split\.tensors\.count 5; expected part 4 of 5 of a set of 6 tensors",
    ):
        open_source(split)


def test_a_wrong_split_count_is_refused(split: Path, tmp_path: Path) -> None:
    write_split(tmp_path / "four", size=200)
    assert len(list((tmp_path / "four").iterdir())) == 4
    shutil.copy(part(tmp_path / "four", 2, 4), part(split, 2))
    with pytest.raises(CheckpointError, match=r"split\.count 4, .*expected part 2 of 5"):
        open_source(part(split, 1))


def split_by_hand(folder: Path, groups: list[list[str]], tensors_count: int) -> None:
    """Parts written with gguf's own writer, split keys set by hand."""
    folder.mkdir()
    for index, names in enumerate(groups):
        writer = GGUFWriter(part(folder, index + 1, len(groups)), "llama")
        writer.add_uint16("split.no", index)
        writer.add_uint16("split.count", len(groups))
        writer.add_int32("split.tensors.count", tensors_count)
        for name in names:
            writer.add_tensor(name, TENSORS[name])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def test_duplicate_tensor_names_across_parts_are_refused(tmp_path: Path) -> None:
    split_by_hand(tmp_path / "dup", [["blk.0.w", "blk.1.w"], ["blk.1.w"]], 3)
    with pytest.raises(CheckpointError, match=r"tensor 'blk\.1\.w' is also in .*m-00001-of-00002"):
        open_source(tmp_path / "dup")


def test_parts_holding_fewer_tensors_than_the_set_says_are_refused(tmp_path: Path) -> None:
    split_by_hand(tmp_path / "few", [["blk.0.w"], ["blk.1.w"]], 3)
    with pytest.raises(CheckpointError, match="the 2 parts hold 2 tensors; expected 3"):
        open_source(tmp_path / "few")


def test_a_renamed_part_cannot_find_its_set(split: Path, tmp_path: Path) -> None:
    shutil.copy(part(split, 1), tmp_path / "renamed.gguf")
    with pytest.raises(CheckpointError, match=r"its name is not NAME-00001-of-00005\.gguf"):
        open_source(tmp_path / "renamed.gguf")


def test_a_folder_of_unrelated_gguf_files_is_refused(tmp_path: Path) -> None:
    for name in ("a.gguf", "b.gguf"):
        write_split(tmp_path / name.removesuffix(".gguf"), size=10**6)
        shutil.move(tmp_path / name.removesuffix(".gguf") / "m.gguf", tmp_path / name)
    with pytest.raises(CheckpointError, match=r"several \.gguf files \(a\.gguf, b\.gguf\)"):
        open_source(tmp_path)


def test_an_aborted_split_leaves_nothing(tmp_path: Path) -> None:
    infos = [TensorInfo.from_array(name, array) for name, array in TENSORS.items()]
    with (
        pytest.raises(RuntimeError),
        GGUFSink(tmp_path / "out" / "m.gguf", infos, shard_size=100) as s,
    ):
        s.write("blk.0.w", TENSORS["blk.0.w"])
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_a_split_missing_a_tensor_publishes_nothing(tmp_path: Path) -> None:
    infos = [TensorInfo.from_array(name, array) for name, array in TENSORS.items()]
    sink = open_sink(tmp_path / "m.gguf", infos, shard_size=100)
    for name in list(TENSORS)[:-1]:
        sink.write(name, TENSORS[name])
    with pytest.raises(CheckpointError, match=r"blk\.5\.w"):
        sink.finalize()
    assert list(tmp_path.iterdir()) == []


def test_parts_appear_only_once_all_are_complete(tmp_path: Path) -> None:
    infos = [TensorInfo.from_array(name, array) for name, array in TENSORS.items()]
    sink = open_sink(tmp_path / "m.gguf", infos, shard_size=100, metadata=METADATA)
    for name, array in TENSORS.items():
        sink.write(name, array)
        assert not any(p.name.endswith(".gguf") for p in tmp_path.iterdir())
    sink.finalize()
    assert len(list(tmp_path.glob("m-0000?-of-00005.gguf"))) == 5
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_a_custom_alignment_applies_to_the_first_part_which_alone_declares_it(
    tmp_path: Path,
) -> None:
    infos = [TensorInfo.from_array(name, array) for name, array in TENSORS.items()]
    metadata = {**METADATA, "general.alignment": 256}
    with GGUFSink(tmp_path / "m.gguf", infos, metadata=metadata, shard_size=300) as sink:
        for name, array in TENSORS.items():
            sink.write(name, array)
    parts = sorted(tmp_path.iterdir())
    readers = [GGUFReader(p) for p in parts]
    assert len(parts) > 2
    assert [r.alignment for r in readers] == [256] + [32] * (len(parts) - 1)
    assert all(t.data_offset % r.alignment == 0 for r in readers for t in r.tensors)
    with open_source(parts[0]) as source:
        assert all(source.load(n).tobytes() == a.tobytes() for n, a in TENSORS.items())
