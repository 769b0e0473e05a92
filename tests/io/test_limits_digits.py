"""Header integers are bounded whether or not the text has runs of digits to look into."""

from __future__ import annotations

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import MAX_INT_DIGITS, load_json


@pytest.mark.parametrize(
    "text",
    [
        '{"w' + "1" * 30 + '": [1, 2]}',  # a long run of digits inside a name
        '{"é": [' + "9" * MAX_INT_DIGITS + "]}",  # non-ASCII text, integers at the bound
        '{"a": [' + "9" * MAX_INT_DIGITS + ", -" + "9" * MAX_INT_DIGITS + "]}",
    ],
)
def test_integers_within_the_bound_parse_as_json_does(text: str) -> None:
    import json

    assert load_json(text.encode(), "f") == json.loads(text)
    assert load_json(text, "f") == json.loads(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, ' + "9" * (MAX_INT_DIGITS + 1) + "]}",
        '{"é": -' + "9" * (MAX_INT_DIGITS + 1) + "}",
    ],
)
def test_a_longer_integer_is_refused(text: str) -> None:
    with pytest.raises(CheckpointError, match=f"integer of .* digits \\(limit {MAX_INT_DIGITS}\\)"):
        load_json(text.encode(), "f")


def test_a_repeated_key_is_named() -> None:
    with pytest.raises(CheckpointError, match="'b' appears twice"):
        load_json(b'{"a": {"b": 1, "c": 2, "b": 3}}', "f")
