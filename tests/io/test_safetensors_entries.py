"""Ordinary safetensors entries parsed by the short path come out as the checked path gives
them; anything unusual takes the checked path and its messages."""

from __future__ import annotations

from typing import Any

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import safetensors_format as fmt


def _entry(dtype: Any = "BF16", shape: Any = None, offsets: Any = None) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "shape": [3, 4] if shape is None else shape,
        "data_offsets": [8, 32] if offsets is None else offsets,
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("model.w", _entry()),
        ("w", _entry("F32", [2, 3], [0, 24])),
        ("empty", _entry("F8_E4M3", [0, 7], [5, 5])),
        ("scalar", _entry("I64", [], [0, 8])),
    ],
)
def test_ordinary_entries_match_the_checked_path(name: str, value: dict[str, Any]) -> None:
    plain = fmt._plain_entry(name, value)
    assert plain is not None
    assert plain == fmt._parse_entry(name, value, "f")
    assert plain.info.shape == tuple(value["shape"])


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("é", _entry(shape=[3, 5], offsets=[0, 30]), None),  # non-ASCII, but valid
        ("a\x00b", _entry(), "NUL"),
        ("w", {**_entry(), "strides": [1]}, "expected keys"),
        ("w", _entry("Q4"), "unknown or unsupported dtype"),
        ("w", _entry(shape=[3, True]), "dimension"),
        ("w", _entry(shape=[3, -4]), "dimension"),
        ("w", _entry(shape=[1] * 17), "rank"),
        ("w", _entry(shape=[2**40, 2**40]), "2\\*\\*62 elements"),
        ("w", _entry(offsets=[8, 33]), "hold 25 bytes"),
        ("w", _entry(offsets=[-1, 23]), "lists of integers"),
        ("w", _entry(offsets=[8, 32, 40]), "lists of integers"),
    ],
)
def test_unusual_entries_take_the_checked_path(
    name: str, value: dict[str, Any], message: str | None
) -> None:
    assert fmt._plain_entry(name, value) is None
    if message is None:
        assert fmt._parse_entry(name, value, "f").info.name == name
    else:
        with pytest.raises(CheckpointError, match=message):
            fmt._parse_entry(name, value, "f")
