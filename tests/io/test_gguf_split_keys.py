"""A split GGUF part's split.* keys checked as read: present together, integers, in range, and
consistent with the tensors the parts hold; each refusal names the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFValueType, GGUFWriter

from lazyparams.errors import CheckpointError
from lazyparams.io import GGUFSource, open_source

T = GGUFValueType
GOOD = {
    "split.no": (0, T.UINT16),
    "split.count": (2, T.UINT16),
    "split.tensors.count": (2, T.INT32),
}


def write_part(path: Path, keys: dict[str, tuple[Any, GGUFValueType]], names: list[str]) -> Path:
    """A GGUF part written with gguf's writer, its split keys as given."""
    writer = GGUFWriter(path, "llama")
    for key, (value, kind) in keys.items():
        writer.add_key_value(key, value, kind)
    for name in names:
        writer.add_tensor(name, np.ones(8, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"split.count": (0, T.UINT16)}, "split.count is 0; expected 1 to 65535 parts"),
        ({"split.no": (2, T.UINT16)}, "split.no is 2; expected 0 to 1 for a set of 2 parts"),
        ({"split.no": None}, "split key split.no is missing; expected all of split.no, "),
        ({"split.count": None}, "split key split.count is missing"),
        ({"split.count": ("2", T.STRING)}, "split key split.count is a STRING; expected"),
        ({"split.tensors.count": (-1, T.INT32)}, "split.tensors.count is -1; expected a count"),
    ],
)
def test_bad_split_keys_are_refused_naming_the_key(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    keys = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = write_part(tmp_path / "m-00001-of-00002.gguf", keys, ["a"])
    for opener in (open_source, lambda p: GGUFSource(p, split_part=True)):
        with pytest.raises(CheckpointError) as err:
            opener(path)
        assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_parts_holding_more_tensors_than_the_set_says_are_refused(tmp_path: Path) -> None:
    write_part(tmp_path / "m-00001-of-00002.gguf", GOOD, ["a", "b"])
    second = {**GOOD, "split.no": (1, T.UINT16)}
    write_part(tmp_path / "m-00002-of-00002.gguf", second, ["c"])
    with pytest.raises(CheckpointError, match="the 2 parts hold 3 tensors; expected 2"):
        open_source(tmp_path / "m-00001-of-00002.gguf")


def test_a_consistent_set_reads_every_part(tmp_path: Path) -> None:
    write_part(tmp_path / "m-00001-of-00002.gguf", GOOD, ["a"])
    write_part(tmp_path / "m-00002-of-00002.gguf", {**GOOD, "split.no": (1, T.UINT16)}, ["b"])
    with open_source(tmp_path / "m-00002-of-00002.gguf") as source:
        assert source.names() == ["a", "b"]
