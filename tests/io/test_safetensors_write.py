"""SafetensorsSink: byte-identical to the library's save_file, any write order, sharding."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import SafetensorsSink, TensorInfo, open_source
from lazyparams.io.safetensors_format import DTYPE_TO_CODE

Check = Callable[[Any, np.ndarray], None]


def write_all(
    path: Path, tensors: dict[str, np.ndarray], order: list[str] | None = None, **options: Any
) -> SafetensorsSink:
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    with SafetensorsSink(path, infos, **options) as sink:
        for name in order if order is not None else list(tensors):
            sink.write(name, tensors[name])
    return sink


def same_bytes(ours: Path, reference: Path) -> bool:
    return ours.read_bytes() == reference.read_bytes()


@pytest.mark.parametrize("order", ["declared", "reversed", "shuffled"])
def test_single_file_is_byte_identical_to_save_file(
    tmp_path: Path, make_tensors: Any, order: str
) -> None:
    tensors = make_tensors(DTYPE_TO_CODE)
    names = list(tensors)
    if order == "reversed":
        names.reverse()
    elif order == "shuffled":
        random.Random(7).shuffle(names)
    save_file(tensors, tmp_path / "ref.safetensors")
    write_all(tmp_path / "ours.safetensors", tensors, names)
    assert same_bytes(tmp_path / "ours.safetensors", tmp_path / "ref.safetensors")


@pytest.mark.parametrize(
    "tensors",
    [
        {},
        {"ünïcode/名前.weight": np.ones((2, 2), np.float16), "a": np.zeros(3, np.uint8)},
        {"b": np.float32([1]), "a": np.float32([2]), "B": np.float32([3]), "a.b": np.int64([4])},
    ],
    ids=["empty", "unicode_names", "name_order"],
)
def test_edge_cases_are_byte_identical(tmp_path: Path, tensors: dict[str, np.ndarray]) -> None:
    save_file(tensors, tmp_path / "ref.safetensors")
    write_all(tmp_path / "ours.safetensors", tensors, list(reversed(tensors)))
    assert same_bytes(tmp_path / "ours.safetensors", tmp_path / "ref.safetensors")


def test_metadata_is_byte_identical(tmp_path: Path) -> None:
    tensors = {"w": np.arange(6, dtype=np.float32)}
    save_file(tensors, tmp_path / "ref.safetensors", metadata={"format": "pt"})
    write_all(tmp_path / "ours.safetensors", tensors, metadata={"format": "pt"})
    assert same_bytes(tmp_path / "ours.safetensors", tmp_path / "ref.safetensors")


def test_concurrent_writes_give_identical_bytes(tmp_path: Path, make_tensors: Any) -> None:
    tensors = make_tensors(["float32", "bfloat16", "int8"])
    infos = [TensorInfo.from_array(name, array) for name, array in tensors.items()]
    with (
        SafetensorsSink(tmp_path / "ours.safetensors", infos) as sink,
        ThreadPoolExecutor(4) as pool,
    ):
        list(pool.map(lambda name: sink.write(name, tensors[name]), tensors))
    save_file(tensors, tmp_path / "ref.safetensors")
    assert same_bytes(tmp_path / "ours.safetensors", tmp_path / "ref.safetensors")


def test_sharded_output_loads_with_the_library(
    tmp_path: Path, make_tensors: Any, assert_same: Check
) -> None:
    tensors = make_tensors(["float32", "float16", "int64"])
    sink = write_all(tmp_path / "out", tensors, list(reversed(tensors)), max_shard_size=64)
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    shards = sorted(p.name for p in (tmp_path / "out").glob("*.safetensors"))
    assert len(shards) > 1 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    assert sorted(set(index["weight_map"].values())) == shards
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in tensors.values())
    assert [p.name for p in sink.files] == [*shards, "model.safetensors.index.json"]
    for shard in shards:
        with safe_open(str(tmp_path / "out" / shard), framework="numpy") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                assert index["weight_map"][name] == shard
                assert_same(f.get_tensor(name), tensors[name])


def test_each_shard_is_byte_identical_to_save_file_of_its_tensors(
    tmp_path: Path, make_tensors: Any
) -> None:
    tensors = make_tensors(["float32", "bfloat16"])
    write_all(tmp_path / "out", tensors, max_shard_size=100)
    weight_map = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    for shard in set(weight_map["weight_map"].values()):
        subset = {n: a for n, a in tensors.items() if weight_map["weight_map"][n] == shard}
        save_file(subset, tmp_path / "ref.safetensors")
        assert same_bytes(tmp_path / "out" / shard, tmp_path / "ref.safetensors")


def test_sharded_output_reads_back_through_open_source(
    tmp_path: Path, make_tensors: Any, assert_same: Check
) -> None:
    tensors = make_tensors(DTYPE_TO_CODE)
    write_all(tmp_path / "out", tensors, max_shard_size=200)
    for path in (tmp_path / "out", tmp_path / "out" / "model.safetensors.index.json"):
        with open_source(path) as source:
            assert sorted(source.names()) == sorted(tensors)
            for name, want in tensors.items():
                assert_same(source.load(name), want)


def test_one_shard_keeps_the_plain_name_and_no_index(tmp_path: Path) -> None:
    write_all(tmp_path / "out", {"w": np.ones(4, np.float32)}, max_shard_size=1 << 20)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.safetensors"]


def test_shard_names_follow_a_file_stem(tmp_path: Path) -> None:
    tensors = {"a": np.ones(8, np.float32), "b": np.ones(8, np.float32)}
    write_all(tmp_path / "weights.safetensors", tensors, max_shard_size=32)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "weights-00001-of-00002.safetensors",
        "weights-00002-of-00002.safetensors",
        "weights.safetensors.index.json",
    ]


def test_int4_is_refused_up_front_and_nothing_is_left(tmp_path: Path) -> None:
    info = TensorInfo.from_array("q", np.zeros(4, ml_dtypes.int4))
    with pytest.raises(CheckpointError, match="tensor 'q': safetensors has no dtype for int4"):
        SafetensorsSink(tmp_path / "out" / "m.safetensors", [info])
    assert list(tmp_path.iterdir()) == []


def test_abort_keeps_an_existing_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"previous")
    info = TensorInfo.of("w", (2,), "float32")
    with pytest.raises(RuntimeError), SafetensorsSink(path, [info]) as sink:
        sink.write("w", np.ones(2, np.float32))
        raise RuntimeError("transform failed")
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


def test_big_endian_input_is_written_little_endian(tmp_path: Path) -> None:
    want = np.arange(4, dtype=np.float32)
    write_all(tmp_path / "m.safetensors", {"w": want.astype(">f4")})
    with safe_open(str(tmp_path / "m.safetensors"), framework="numpy") as f:
        assert f.get_tensor("w").tolist() == want.tolist()
