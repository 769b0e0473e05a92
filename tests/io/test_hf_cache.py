"""A Hugging Face cache entry (`models--ORG--NAME/snapshots/REV/*` linking into `blobs/`) opens
as a checkpoint folder; links that leave the entry are still refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save, save_file

from lazyparams.errors import CheckpointError
from lazyparams.io import open_source
from lazyparams.io.limits import inside_folder, link_root

W = np.arange(6, dtype=np.float32).reshape(2, 3)


def fake_cache(hub: Path, files: dict[str, bytes]) -> Path:
    """A cache entry as huggingface_hub lays it out: each file's bytes in `blobs/`, named by a
    made-up hash, and a relative link to it in `snapshots/REV/`; the snapshot's path."""
    entry = hub / "models--org--name"
    snapshot = entry / "snapshots" / "0123abcd"
    (entry / "blobs").mkdir(parents=True)
    (entry / "refs").mkdir()
    (entry / "refs" / "main").write_text("0123abcd")
    snapshot.mkdir(parents=True)
    for number, (name, data) in enumerate(files.items()):
        (entry / "blobs" / f"{number:040x}").write_bytes(data)
        os.symlink(f"../../blobs/{number:040x}", snapshot / name)
    return snapshot


def test_a_snapshot_whose_files_link_into_blobs_opens(tmp_path: Path) -> None:
    config = json.dumps({"model_type": "llama"}).encode()
    snapshot = fake_cache(tmp_path, {"model.safetensors": save({"w": W}), "config.json": config})
    with open_source(snapshot) as source:
        assert np.array_equal(source.load("w"), W)
    assert link_root(snapshot) == (
        tmp_path.resolve() / "models--org--name",
        "Hugging Face cache entry",
    )


def test_a_sharded_snapshot_opens_through_its_linked_index(tmp_path: Path) -> None:
    index = {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}
    snapshot = fake_cache(
        tmp_path,
        {
            "model.safetensors.index.json": json.dumps(index).encode(),
            "model-1.safetensors": save({"a": W}),
            "model-2.safetensors": save({"b": W + 1}),
        },
    )
    with open_source(snapshot) as source:
        assert sorted(source.names()) == ["a", "b"]
        assert np.array_equal(source.load("b"), W + 1)


def test_a_snapshot_link_out_of_the_cache_entry_is_refused(tmp_path: Path) -> None:
    snapshot = fake_cache(tmp_path / "hub", {"config.json": b"{}"})
    save_file({"w": W}, str(tmp_path / "elsewhere.safetensors"))
    os.symlink(tmp_path / "elsewhere.safetensors", snapshot / "model.safetensors")
    with pytest.raises(
        CheckpointError, match=r"outside the Hugging Face cache entry .*models--org"
    ):
        open_source(snapshot)
    with open_source(snapshot, allow_outside_links=True) as source:
        assert list(source.names()) == ["w"]


def test_a_snapshot_link_into_another_entrys_blobs_is_refused(tmp_path: Path) -> None:
    snapshot = fake_cache(tmp_path, {"config.json": b"{}"})
    other = tmp_path / "models--org--other" / "blobs"
    other.mkdir(parents=True)
    save_file({"w": W}, str(other / ("f" * 40)))
    os.symlink(f"../../../models--org--other/blobs/{'f' * 40}", snapshot / "model.safetensors")
    with pytest.raises(
        CheckpointError, match=r"'model\.safetensors' resolves to .*models--org--other"
    ):
        open_source(snapshot)


def test_without_blobs_the_folder_alone_is_the_root(tmp_path: Path) -> None:
    """A folder that only looks like a snapshot (no `blobs/` beside it) is no cache entry."""
    snapshot = tmp_path / "models--org--name" / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    (tmp_path / "models--org--name" / "w.npy").write_bytes(b"")
    os.symlink("../../w.npy", snapshot / "w.npy")
    assert link_root(snapshot) == (snapshot.resolve(), "checkpoint folder")
    with pytest.raises(CheckpointError, match="outside the checkpoint folder"):
        inside_folder(snapshot, "w.npy", "ckpt")
