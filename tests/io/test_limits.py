"""The shared header bounds: JSON, shapes, names and folder containment."""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import MAX_RANK, check_name, check_shape, inside_folder, load_json


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests too deep"),
        (b'{"a": ' + b"7" * 5000 + b"}", "integer of 5000 digits"),
        (b'{"a": 1, "a": 2}', "'a' appears twice"),
        (b'{"a": ', "not valid JSON"),
        (b'{"a": "\xff"}', "not valid UTF-8"),
    ],
)
def test_hostile_json_is_refused_naming_the_file(data: bytes, expected: str) -> None:
    with pytest.raises(CheckpointError, match=expected) as caught:
        load_json(data, "model.safetensors", "header")
    assert str(caught.value).startswith("model.safetensors: ")


def test_valid_json_parses() -> None:
    assert load_json('{"a": [1, -2, 3.5]}', "x") == {"a": [1, -2, 3.5]}


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ([2**70, 0], "dimension <huge int>|dimension 1180591620717411303424"),
        ([1] * (MAX_RANK + 1), "rank 17"),
        ([True], "dimension True"),
        ([-1, 4], "dimension -1"),
        ([2**31, 2**31, 2**31], "more than 2\\*\\*62 elements"),
        (["4"], "dimension '4'"),
    ],
)
def test_bad_shapes_are_refused(shape: list[object], expected: str) -> None:
    with pytest.raises(CheckpointError, match=expected):
        check_shape(shape, "f.safetensors: tensor 'w'")


def test_good_shapes_pass_through() -> None:
    assert check_shape([0, 3, 2**40], "w") == (0, 3, 2**40)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a\x00b", "NUL"), ("\udce9", "lone surrogate"), (3, "not a string"), ("x" * 70000, "long")],
)
def test_bad_names_are_refused(name: object, expected: str) -> None:
    with pytest.raises(CheckpointError, match=expected):
        check_name(name, "f.npz")


def test_links_out_of_the_folder_are_refused_unless_allowed(tmp_path: Path) -> None:
    folder, outside = tmp_path / "ckpt", tmp_path / "secret.npy"
    folder.mkdir()
    outside.write_bytes(b"x")
    (folder / "w.npy").symlink_to(outside)
    (folder / "inner.npy").write_bytes(b"y")
    with pytest.raises(CheckpointError, match="outside the checkpoint folder"):
        inside_folder(folder, "w.npy", "ckpt")
    assert inside_folder(folder, "w.npy", "ckpt", allow_outside=True) == folder / "w.npy"
    assert inside_folder(folder, "inner.npy", "ckpt") == folder / "inner.npy"
    with pytest.raises(CheckpointError, match="outside"):
        inside_folder(folder, "../secret.npy", "ckpt")
