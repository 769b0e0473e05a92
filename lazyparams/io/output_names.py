"""Tensor names checked as the names an output format stores them under, before any data.

npz members and .npy files take a tensor name as a relative path (`name.npy`), so it must stay
inside the archive or folder; a folder's files must also stay apart on file systems that fold
case and Unicode forms; GGUF names are C strings llama.cpp reads into 64 bytes. Imports only the
standard library, the error types and `io.limits`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import check_name

GGUF_MAX_NAME_BYTES = 63
"""llama.cpp keeps a tensor name in 64 bytes, its final NUL included."""
FILE_NAME_BYTES = 255
"""The longest file name (one path part) common file systems allow."""


def check_text_names(path: str, names: Iterable[str]) -> None:
    """Refuse a name no format can store: not valid UTF-8 text, or with a NUL character."""
    for name in names:
        try:
            check_name(name, f"{path}: output")
        except CheckpointError as err:
            raise CheckpointError(
                f"{err}; expected an output name of valid UTF-8 text without NUL characters, "
                f"which every format can store (rename it in the transform)"
            ) from None


def check_member_names(path: str, names: Iterable[str]) -> None:
    """Refuse a name that is no relative path inside a zip archive (`name.npy`)."""
    listed = list(names)
    check_text_names(path, listed)
    for name in listed:
        _check_relative(path, name, "an npz member name")


def check_file_names(path: str, names: Iterable[str]) -> None:
    """Refuse a name that is no file name inside a folder (`name.npy`), or whose file would
    meet another's on a file system that folds case and Unicode forms."""
    listed = list(names)
    check_text_names(path, listed)
    for name in listed:
        _check_relative(path, name, "a file name")
        _check_length(path, name)
    _check_folder_collisions(path, listed)


def check_gguf_names(path: str, names: Iterable[str]) -> None:
    """Refuse a name llama.cpp cannot read into its 64 bytes."""
    listed = list(names)
    check_text_names(path, listed)
    for name in listed:
        _check_gguf(path, name)


def _refuse(path: str, name: str, what: str, problem: str, expected: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: output tensor {name!r} cannot be {what}: it {problem}; expected {expected}"
    )


def _check_relative(path: str, name: str, what: str) -> None:
    expected = (
        "a relative path of '/'-separated parts, none empty, '.' or '..', "
        "without backslashes or control characters"
    )
    if name.startswith("/"):
        raise _refuse(path, name, what, "is an absolute path", expected)
    bad = next((c for c in name if c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise _refuse(path, name, what, f"contains the character {bad!r}", expected)
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise _refuse(path, name, what, "has an empty, '.' or '..' path part", expected)


def _check_length(path: str, name: str) -> None:
    parts = name.split("/")
    longest = max(len(p.encode("utf-8")) for p in [*parts[:-1], parts[-1] + ".npy"])
    if longest > FILE_NAME_BYTES:
        raise _refuse(
            path,
            name,
            "a file name",
            f"has a path part of {longest} bytes",
            f"at most {FILE_NAME_BYTES}",
        )


def _check_gguf(path: str, name: str) -> None:
    size = len(name.encode("utf-8"))
    if size > GGUF_MAX_NAME_BYTES:
        raise _refuse(
            path,
            name,
            "a GGUF tensor name",
            f"is {size} bytes long",
            f"a GGUF tensor name of at most {GGUF_MAX_NAME_BYTES} bytes, as llama.cpp reads it "
            "(rename it in the transform)",
        )


def _folded(relative: str) -> str:
    """The form under which a case- and normalisation-insensitive file system finds a path."""
    return unicodedata.normalize("NFC", relative).casefold()


def _check_folder_collisions(path: str, names: Sequence[str]) -> None:
    """Two tensors must not land on one file, nor one tensor's file on another's folder."""
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    for name in names:
        parts = name.split("/")
        key = _folded(name + ".npy")
        if key in files:
            raise _collision(path, name, files[key], "the same file")
        files[key] = name
        for depth in range(1, len(parts)):
            folders.setdefault(_folded("/".join(parts[:depth])), name)
    for key, name in files.items():
        if key in folders:
            raise _collision(path, name, folders[key], "a file where the other needs a folder")


def _collision(path: str, name: str, other: str, what: str) -> CheckpointError:
    return CheckpointError(
        f"{path}: output tensors {other!r} and {name!r} would be {what} in the .npy folder "
        "(file names are compared ignoring case and Unicode form, as macOS and Windows do); "
        "expected names that stay apart (rename one in the transform)"
    )
