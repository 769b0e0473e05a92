"""Foreign errors in our words: each reason says what is wrong and where, never in the words or
reprs of the library that failed."""

from __future__ import annotations

import errno
import io
import json
import zipfile
from pathlib import Path

import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import short_repr
from lazyparams.io.model_config import read_config
from lazyparams.io.reasons import (
    json_reason,
    os_reason,
    pickle_reason,
    utf8_reason,
    zip_directory_reason,
)


def _json_error(text: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(text)
    return caught.value


def test_json_errors_name_the_byte_of_the_utf8_text() -> None:
    assert json_reason(_json_error('{"é": 1,}')) == (
        "expected a key in double quotes at byte 9 (line 1, column 9)"  # é is two bytes
    )
    assert json_reason(_json_error("[1] 2")).startswith("more text after the end")


def test_utf8_errors_name_the_byte() -> None:
    with pytest.raises(UnicodeDecodeError) as bad:
        b"ab\xffcd".decode("utf-8")
    assert utf8_reason(bad.value) == "byte 2 (0xff) is not valid there in UTF-8"
    with pytest.raises(UnicodeDecodeError) as cut:
        b"ab\xc3".decode("utf-8")
    assert utf8_reason(cut.value) == "the text ends inside a character that starts at byte 2"


def test_os_errors_drop_the_file_names_python_repeats() -> None:
    err = OSError(errno.ENOSPC, "No space left on device", "/a/file")
    assert os_reason(err) == "No space left on device"


def test_zip_and_pickle_reasons_are_ours() -> None:
    with pytest.raises(zipfile.BadZipFile) as caught:
        zipfile.ZipFile(io.BytesIO(b"not a zip at all"))
    assert zip_directory_reason(caught.value).startswith("no end-of-central-directory record")
    assert pickle_reason(IndexError("pop from empty list")) == (
        "an opcode takes more values than the pickle has pushed"
    )


def test_short_repr_shows_objects_by_type_never_by_address() -> None:
    shown = short_repr(("storage", print, object(), {"k": [1, 2.5]}), 200)
    assert shown == "('storage', <builtin_function_or_method>, <object>, {'k': [1, 2.5]})"
    assert short_repr(tuple(range(10_000))).endswith("...")


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b'{"hidden_size": 64,', r"expected a key in double quotes at byte 19 \(line 1"),
        (b'{"name": "\xff"}', r"not UTF-8 text: byte 10 \(0xff\) is not valid there in UTF-8"),
        (b"[" * 100_000, r"it nests too deep"),
    ],
    ids=["truncated", "not_utf8", "deep"],
)
def test_a_config_that_is_no_json_is_refused_in_our_words(
    tmp_path: Path, data: bytes, pattern: str
) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(data)
    with pytest.raises(
        CheckpointError, match=rf"config\.json: not a readable JSON file: {pattern}"
    ):
        read_config(path)
