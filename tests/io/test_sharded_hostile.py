"""Hostile index files and folders: bounds, shards that are not shards, disagreeing indexes,
and containment of shards and folder files (symlinks included) with its opt-out."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import ShardedSource, open_source
from lazyparams.io.sharded_source import INDEX_LIMIT, MAX_SHARDS

INDEX = "model.safetensors.index.json"


def make_index(folder: Path, weight_map: object, name: str = INDEX) -> Path:
    path = folder / name
    path.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return path


def shard(path: Path, **tensors: float) -> Path:
    save_file({name: np.full(2, value, np.float32) for name, value in tensors.items()}, path)
    return path


def refused(path: Path, culprit: Path, *patterns: str, allow: bool = False) -> str:
    """The message open_source refuses `path` with, checked to start with `culprit`."""
    with pytest.raises(CheckpointError) as caught:
        open_source(path, allow_outside_links=allow)
    message = str(caught.value)
    assert message.startswith(f"{culprit}: "), message
    for pattern in patterns:
        assert pattern in message, (pattern, message)
    return message


# 1. Bounded parsing of the index --------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"weight_map": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "index nests too deep"),
        (b'{"weight_map": {"a": "s.safetensors"}, "n": ' + b"1" * 5000 + b"}", "5000 digits"),
        (b'{"weight_map": {"a": "s.safetensors", "a": "t.safetensors"}}', "'a' appears twice"),
        (b'{"weight_map": {}}', "weight_map is empty; expected at least one tensor name"),
        (b'{"weight_map": {"a\\u0000": "s.safetensors"}}', "contains a NUL character"),
        (b'{"weight_map": {"\\udce9": "s.safetensors"}}', "(a lone surrogate)"),
        (b'{"weight_map": {"a": "s\\u0000.safetensors"}}', "is not a file name"),
        (b'{"weight_map": {"a": "\\udce9.safetensors"}}', "(a lone surrogate)"),
        (b'{"weight_map": {"a": ""}}', "is not a file name"),
        (b'{"weight_map": {"a": "' + b"x" * 5000 + b'"}}', "do not exist"),
    ],
)
def test_hostile_indexes_are_refused_naming_the_index(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    index = tmp_path / INDEX
    index.write_bytes(content)
    refused(index, index, expected)
    refused(tmp_path, index, expected)


def test_an_index_past_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    index = tmp_path / INDEX
    with open(index, "wb") as file:
        file.truncate(INDEX_LIMIT + 1)  # sparse: nothing is written, nothing must be read
    refused(index, index, f"exceeds the limit of {INDEX_LIMIT}")


def test_an_index_naming_too_many_shards_is_refused_before_any_is_looked_for(
    tmp_path: Path,
) -> None:
    index = make_index(tmp_path, {f"t{i}": f"s{i}.safetensors" for i in range(MAX_SHARDS + 1)})
    refused(index, index, f"names {MAX_SHARDS + 1} shards; the limit is ")


def test_an_index_naming_more_shards_than_files_may_be_opened_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda which: (100, 100))
    index = make_index(tmp_path, {f"t{i}": f"s{i}.safetensors" for i in range(37)})
    refused(index, index, "names 37 shards; the limit is 36", "ulimit -n")


# 2. Shards that are not shards, and indexes that disagree with their shards --------------------


@pytest.mark.parametrize("listed", [INDEX, "other.safetensors.index.json", "sub/x.index.json"])
def test_an_index_listing_an_index_is_refused(tmp_path: Path, listed: str) -> None:
    (tmp_path / "other.safetensors.index.json").write_text('{"weight_map": {"b": "s.bin"}}')
    index = make_index(tmp_path, {"a": listed})
    refused(index, index, f"shard {listed!r} is an index, not a shard")


def test_a_shard_of_another_kind_than_the_index_says_is_refused(tmp_path: Path) -> None:
    (tmp_path / "w.npz").write_bytes(b"PK\x05\x06" + bytes(18))
    index = make_index(tmp_path, {"a": "w.npz"})
    refused(index, index, "shard 'w.npz' is not a .safetensors file")


def test_a_shard_that_is_a_folder_or_missing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir.safetensors").mkdir()
    index = make_index(tmp_path, {"a": "dir.safetensors", "b": "gone.safetensors"})
    message = refused(index, index, "names 2 shard(s) that do not exist or are not files")
    assert "'dir.safetensors'" in message and "'gone.safetensors'" in message


def test_a_tensor_in_two_shards_is_refused(tmp_path: Path) -> None:
    shard(tmp_path / "s1.safetensors", a=1, b=2)
    shard(tmp_path / "s2.safetensors", b=3)
    index = make_index(tmp_path, {"a": "s1.safetensors", "b": "s2.safetensors"})
    refused(index, index, "tensor 'b' is in shard 's1.safetensors'", "'s2.safetensors'")


def test_a_shard_tensor_the_index_does_not_list_is_refused(tmp_path: Path) -> None:
    shard(tmp_path / "s1.safetensors", a=1, extra=2)
    index = make_index(tmp_path, {"a": "s1.safetensors"})
    refused(index, index, "shard 's1.safetensors' holds tensor 'extra'", "does not list")


def test_names_of_one_file_are_one_shard(tmp_path: Path) -> None:
    shard(tmp_path / "s1.safetensors", a=1, b=2)
    index = make_index(tmp_path, {"a": "s1.safetensors", "b": "./s1.safetensors"})
    with open_source(index) as source:
        assert source.names() == ["a", "b"] and source.load("b").tolist() == [2, 2]


def test_a_source_given_open_source_as_opener_does_not_recurse(tmp_path: Path) -> None:
    index = make_index(tmp_path, {"a": INDEX})
    with pytest.raises(CheckpointError, match="is an index, not a shard"):
        ShardedSource(index, open_source)


# 3. Containment: shards and folder files resolve inside the folder unless allowed ---------------


@pytest.fixture(name="outside")
def outside_fixture(tmp_path: Path) -> Path:
    """A valid shard in a folder beside the checkpoint folder."""
    (tmp_path / "elsewhere").mkdir()
    return shard(tmp_path / "elsewhere" / "secret.safetensors", a=5)


def test_a_symlinked_shard_pointing_outside_is_refused_unless_allowed(
    tmp_path: Path, outside: Path
) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.symlink(outside, folder / "s1.safetensors")
    index = make_index(folder, {"a": "s1.safetensors"})
    for path in (index, folder):
        message = refused(path, index, "'s1.safetensors' resolves to", "outside the checkpoint")
        assert "--allow-outside-links" in message
        with open_source(path, allow_outside_links=True) as source:
            assert source.load("a").tolist() == [5, 5]


@pytest.mark.parametrize("how", ["dotdot", "absolute", "linked_folder"])
def test_shards_named_outside_the_folder_are_refused_unless_allowed(
    tmp_path: Path, outside: Path, how: str
) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    names = {"dotdot": "../elsewhere/secret.safetensors", "absolute": str(outside)}
    if how == "linked_folder":
        os.symlink(outside.parent, folder / "sub")
    index = make_index(folder, {"a": names.get(how, "sub/secret.safetensors")})
    refused(index, index, "outside the checkpoint folder")
    with open_source(index, allow_outside_links=True) as source:
        assert source.load("a").tolist() == [5, 5]


def test_a_link_inside_the_folder_is_followed(tmp_path: Path) -> None:
    shard(tmp_path / "real.safetensors", a=1)
    os.symlink("real.safetensors", tmp_path / "s1.safetensors")
    index = make_index(tmp_path, {"a": "s1.safetensors"})
    with open_source(index) as source:
        assert source.load("a").tolist() == [1, 1]


def test_a_folder_whose_weights_file_links_outside_is_refused_unless_allowed(
    tmp_path: Path, outside: Path
) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.symlink(outside, folder / "model.safetensors")
    refused(folder, folder, "'model.safetensors' resolves to", "outside the checkpoint folder")
    with open_source(folder, allow_outside_links=True) as source:
        assert source.names() == ["a"]


def test_a_folder_whose_index_links_outside_is_refused(tmp_path: Path, outside: Path) -> None:
    make_index(outside.parent, {"a": "secret.safetensors"})
    folder = tmp_path / "ckpt"
    folder.mkdir()
    os.symlink(outside.parent / INDEX, folder / INDEX)
    refused(folder, folder, f"{INDEX!r} resolves to", "outside the checkpoint folder")


def test_a_corrupt_zip_without_extension_is_refused_as_such(tmp_path: Path) -> None:
    path = tmp_path / "weights"
    path.write_bytes(b"PK\x03\x04" + bytes(40))
    refused(path, path, "not a readable zip archive")


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "model.safetensors")
    refused(tmp_path, tmp_path / "model.safetensors", "not a regular file")
    refused(tmp_path / "model.safetensors", tmp_path / "model.safetensors", "not a regular file")
    index = make_index(tmp_path, {"a": "model.safetensors"})
    refused(index, index, "do not exist or are not files: 'model.safetensors'")
