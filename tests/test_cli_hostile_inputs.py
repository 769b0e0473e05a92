"""`lazyparams convert` and `plan` on hostile safetensors inputs: exit 1, one line naming the
culprit, nothing at DST (nor beside it); `--allow-outside-links` lets shards leave the folder."""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.cli import main
from tests.engine.helpers import run_cli
from tests.io.conftest import _messages_show_no_object_repr  # noqa: F401 - autouse: no repr in errors

INDEX = "model.safetensors.index.json"


def raw_file(path: Path, header: bytes | object, data: bytes = b"") -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def index(folder: Path, weight_map: dict[str, str]) -> Path:
    path = folder / INDEX
    path.write_text(json.dumps({"weight_map": weight_map}))
    return path


def gap(folder: Path) -> tuple[Path, str]:
    header = {
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]},
    }
    path = raw_file(folder / "m.safetensors", header, bytes(20))
    return path, f"{path}: bytes [8, 12) of the data area, before tensor 'b', belong to no tensor"


def huge_integer(folder: Path) -> tuple[Path, str]:
    header = b'{"a": {"dtype": "F32", "shape": [' + b"7" * 5000 + b'], "data_offsets": [0, 0]}}'
    path = raw_file(folder / "m.safetensors", header)
    return path, f"{path}: integer of 5000 digits (limit 20), in the entry of tensor 'a'"


def surrogate_name(folder: Path) -> tuple[Path, str]:
    header = b'{"a\\udce9": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}'
    path = raw_file(folder / "m.safetensors", header)
    return path, f"{path}: tensor name 'a\\udce9' is not valid Unicode"


def self_index(folder: Path) -> tuple[Path, str]:
    path = index(folder, {"a": INDEX})
    return folder, f"{path}: shard {INDEX!r} is an index, not a shard"


def empty_index(folder: Path) -> tuple[Path, str]:
    path = index(folder, {})
    return folder, f"{path}: the index's weight_map is empty"


def linked_shard(folder: Path) -> tuple[Path, str]:
    outside = folder.parent / "elsewhere.safetensors"
    save_file({"a": np.ones(2, np.float32)}, outside)
    os.symlink(outside, folder / "s1.safetensors")
    path = index(folder, {"a": "s1.safetensors"})
    return folder, f"{path}: weight_map: 's1.safetensors' resolves to {outside}, outside"


CASES: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "gap": gap,
    "huge_integer": huge_integer,
    "surrogate_name": surrogate_name,
    "self_index": self_index,
    "empty_index": empty_index,
    "linked_shard": linked_shard,
}


@pytest.fixture(name="folder")
def folder_fixture(tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fmt", ["safetensors", "npz", "npy", "gguf"])
def test_convert_refuses_and_leaves_nothing_at_dst(
    folder: Path, capsys: pytest.CaptureFixture[str], case: str, fmt: str
) -> None:
    src, message = CASES[case](folder)
    dst = folder.parent / f"out.{fmt}"
    before = sorted(folder.parent.iterdir())
    argv = ["convert", "cast:float16", str(src), str(dst), "--format", fmt, "--no-progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}"), err
    assert len(err.splitlines()) == 1
    assert not dst.exists() and sorted(folder.parent.iterdir()) == before


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_refuses_with_the_same_message(
    folder: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    src, message = CASES[case](folder)
    assert main(["plan", "cast:float16", str(src)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {message}")


def test_allow_outside_links_lets_plan_and_convert_follow_the_link(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = linked_shard(folder)
    dst = folder.parent / "out.safetensors"
    assert main(["plan", "cast:float16", str(src), "--allow-outside-links"]) == 0
    argv = ["convert", "cast:float16", str(src), str(dst), "--no-progress"]
    assert main([*argv, "--allow-outside-links"]) == 0
    assert dst.is_file()
    capsys.readouterr()
    assert main(["show", "cast:float16", str(src), "--allow-outside-links"]) == 0


def test_allow_outside_links_is_refused_for_cluster_runs(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, _ = linked_shard(folder)
    dst = folder.parent / "out.safetensors"
    argv = ["convert", "cast:float16", str(src), str(dst), "--cluster", "local:1"]
    assert main([*argv, "--allow-outside-links"]) == 1
    assert "allow_outside_links: applies to a conversion on one machine" in capsys.readouterr().err
    assert main(["plan", "cast:float16", str(src), "--workers-on-cluster", "2",
                 "--allow-outside-links"]) == 1  # fmt: skip
    assert "--allow-outside-links: applies to one machine" in capsys.readouterr().err
    assert not dst.exists()


def test_the_console_script_prints_no_traceback(folder: Path) -> None:
    src, message = self_index(folder)
    done = run_cli("convert", "cast:float16", src, folder.parent / "out", cwd=folder.parent)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {message}") and "Traceback" not in done.stderr
