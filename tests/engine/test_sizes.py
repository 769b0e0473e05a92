"""Sizes as people write them: binary and decimal units, plain bytes, and clear refusals."""

from __future__ import annotations

import pytest

from lazyparams.engine import format_bytes, parse_size
from lazyparams.errors import ConvertError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1024", 1024),
        ("512MiB", 512 << 20),
        ("4GiB", 4 << 30),
        ("4G", 4 << 30),
        ("1.5 GiB", 3 << 29),
        ("5GB", 5 * 10**9),
        ("10kb", 10_000),
        ("2TiB", 2 << 40),
        ("0B", 0),
        (".5KiB", 512),
        (2048, 2048),
    ],
)
def test_sizes_parse(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "4 GiBs", "-1", "1e9", "4XB", "1,5GiB"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(
        ConvertError, match=f"budget: expected a size like 512MiB, 4GiB or 5GB, got {text!r}"
    ):
        parse_size(text, "budget")


def test_negative_and_odd_values_are_refused() -> None:
    with pytest.raises(ConvertError, match="shard_size: expected zero or more bytes, got -5"):
        parse_size(-5, "shard_size")
    with pytest.raises(ConvertError, match="got None"):
        parse_size(None)  # type: ignore[arg-type]


def test_sizes_print_in_binary_units() -> None:
    assert format_bytes(parse_size("1.5GiB")) == "1.5 GiB"
