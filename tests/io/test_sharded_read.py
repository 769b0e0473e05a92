"""ShardedSource: an index JSON tying shards together, and the ways an index can be wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import ShardedSource, open_source


def make_index(folder: Path, weight_map: object) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return path


def test_names_follow_the_shards_and_loads_come_from_the_right_one(tmp_path: Path) -> None:
    save_file({"b": np.ones(2, np.float32), "a": np.zeros(2, np.int8)}, tmp_path / "s2.safetensors")
    save_file({"c": np.full(3, 7, np.int32)}, tmp_path / "s1.safetensors")
    index = make_index(
        tmp_path, {"a": "s2.safetensors", "b": "s2.safetensors", "c": "s1.safetensors"}
    )
    with ShardedSource(index, open_source) as source:
        assert source.names() == ["c", "b", "a"]
        assert source.load("c").tolist() == [7, 7, 7]
        assert source.info("a").dtype == "int8"


def test_index_naming_a_missing_shard_is_refused(tmp_path: Path) -> None:
    save_file({"a": np.ones(2, np.float32)}, tmp_path / "s1.safetensors")
    index = make_index(tmp_path, {"a": "s1.safetensors", "b": "s2.safetensors"})
    with pytest.raises(
        CheckpointError, match=r"names 1 shard\(s\) that do not exist .*: 's2\.safetensors'"
    ):
        open_source(index)
    with pytest.raises(CheckpointError, match=f"^{index}: "):
        open_source(tmp_path)


def test_index_placing_a_tensor_in_the_wrong_shard_is_refused(tmp_path: Path) -> None:
    save_file({"a": np.ones(2, np.float32)}, tmp_path / "s1.safetensors")
    index = make_index(tmp_path, {"a": "s1.safetensors", "z": "s1.safetensors"})
    with pytest.raises(
        CheckpointError, match=r"index\.json: .*tensor 'z' in shard 's1\.safetensors'"
    ):
        open_source(index)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "index is not valid JSON"),
        ('{"metadata": {}}', "index has no weight_map"),
        ('{"weight_map": {"a": 3}}', "index has no weight_map"),
        ('{"weight_map": {"a": "../outside.safetensors"}}', "outside the checkpoint folder"),
        ('{"weight_map": {"a": "/abs.safetensors"}}', "outside the checkpoint folder"),
    ],
)
def test_malformed_index_is_refused(tmp_path: Path, content: str, message: str) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(content)
    with pytest.raises(CheckpointError, match=message) as caught:
        open_source(index)
    assert str(caught.value).startswith(f"{index}: ")


def test_a_bad_shard_is_reported_by_its_own_name(tmp_path: Path) -> None:
    (tmp_path / "s1.safetensors").write_bytes(b"\x00" * 4)
    index = make_index(tmp_path, {"a": "s1.safetensors"})
    with pytest.raises(CheckpointError, match=r"s1\.safetensors: file of 4 bytes is too short"):
        open_source(index)
