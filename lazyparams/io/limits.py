"""Bounds every reader checks before it trusts a header: JSON, shapes, names, paths.

A checkpoint's header is untrusted input. These checks run before anything is allocated from
what a header declares, and each failure is a CheckpointError naming the file and the culprit.
Imports only the standard library, the error types and io.reasons.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.reasons import json_reason, utf8_reason

MAX_RANK = 16
MAX_DIM = 2**62
MAX_ELEMENTS = 2**62
MAX_INT_DIGITS = 20
MAX_NAME_BYTES = 65536
_DIGITS_AS_ZERO = bytes(48 if chr(b).isdigit() and b < 128 else 32 for b in range(256))


def check_shape(shape: Iterable[object], where: str) -> tuple[int, ...]:
    """`shape` as a tuple of ints, refused unless every dim is an int in [0, MAX_DIM].

    Also refuses a rank over MAX_RANK and an element count over MAX_ELEMENTS (a dim of 2**70
    next to a zero is refused too: it fits no int64 a reader would compute offsets with).
    """
    dims = list(shape)
    if len(dims) > MAX_RANK:
        raise CheckpointError(f"{where}: rank {len(dims)} exceeds the limit of {MAX_RANK}")
    for dim in dims:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim <= MAX_DIM:
            raise CheckpointError(
                f"{where}: dimension {short_repr(dim)} is not an integer in [0, 2**62] "
                f"(shape {short_repr(dims)})"
            )
    checked = tuple(d for d in dims if isinstance(d, int))
    if math.prod(checked) > MAX_ELEMENTS:
        raise CheckpointError(f"{where}: shape {list(checked)} holds more than 2**62 elements")
    return checked


def check_name(name: object, where: str) -> str:
    """`name` as a tensor name: a string, encodable as UTF-8, with no NUL, of bounded length."""
    if not isinstance(name, str):
        raise CheckpointError(f"{where}: tensor name {short_repr(name)} is not a string")
    if "\x00" in name:
        raise CheckpointError(f"{where}: tensor name {name!r} contains a NUL character")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        raise CheckpointError(
            f"{where}: tensor name {name!r} is not valid Unicode (a lone surrogate)"
        ) from None
    if len(encoded) > MAX_NAME_BYTES:
        raise CheckpointError(f"{where}: tensor name of {len(encoded)} bytes is too long")
    return name


def load_json(data: bytes | str, where: str, what: str = "JSON") -> Any:
    """Parse untrusted JSON with bounded nesting, bounded integers and no duplicate keys.

    Nesting too deep for the parser and integers longer than MAX_INT_DIGITS digits are refused
    while parsing, so no input ends in a RecursionError or a quadratic int conversion.
    """
    text = _as_text(data, where, what)
    # integers are checked one by one only where a run of digits could be too long for one
    parse_int = _bounded_int(where) if _may_hold_long_int(data, text) else None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(where), parse_int=parse_int)
    except RecursionError:
        raise CheckpointError(f"{where}: {what} nests too deep to be a checkpoint header") from None
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{where}: {what} is not valid JSON: {json_reason(err)}") from None


def inside_folder(folder: Path, relative: str, where: str, allow_outside: bool = False) -> Path:
    """`folder / relative`, refused when it resolves (symlinks included) outside `folder`, or,
    for a snapshot of a Hugging Face cache, outside the cache entry (see `link_root`)."""
    candidate = folder / relative
    if allow_outside:
        return candidate
    root, what = link_root(folder)
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and root not in resolved.parents:
        raise CheckpointError(
            f"{where}: {relative!r} resolves to {resolved}, outside the {what} {root} "
            "(pass --allow-outside-links to follow links out of the folder)"
        )
    return candidate


def link_root(folder: Path) -> tuple[Path, str]:
    """The real folder that links found in `folder` may resolve into, and what to call it.

    That is `folder` itself, unless it lies in a snapshot of a Hugging Face cache entry
    (`models--ORG--NAME/snapshots/REV/...`, whose files link into `../../blobs/`): then it is
    the entry, the `models--*` folder holding both `snapshots/` and `blobs/`.
    """
    real = Path(os.path.realpath(folder))
    for snapshot in (real, *real.parents):
        entry = snapshot.parent.parent
        if snapshot.parent.name == "snapshots" and _is_cache_entry(entry):
            return entry, "Hugging Face cache entry"
    return real, "checkpoint folder"


def _is_cache_entry(folder: Path) -> bool:
    prefixes = ("models--", "datasets--", "spaces--")
    return folder.name.startswith(prefixes) and (folder / "blobs").is_dir()


def _may_hold_long_int(data: bytes | str, text: str) -> bool:
    """Whether `text` has a run of more than MAX_INT_DIGITS ASCII digits (or any non-ASCII
    character, not looked into): found with a byte translation rather than a per-integer
    hook or a regex, both slow on a 92k-tensor header that is mostly digits."""
    if not text.isascii():
        return True
    raw = data if isinstance(data, bytes) else text.encode("ascii")
    return b"0" * (MAX_INT_DIGITS + 1) in raw.translate(_DIGITS_AS_ZERO)


def _as_text(data: bytes | str, where: str, what: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{where}: {what} is not valid UTF-8: {utf8_reason(err)}") from None


def _unique_keys(where: str) -> Any:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):  # a key repeats: name the first one that does
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise CheckpointError(f"{where}: the key {key!r} appears twice")
                seen.add(key)
        return result

    return build


def _bounded_int(where: str) -> Any:
    def parse(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise CheckpointError(
                f"{where}: integer of {len(digits)} digits (limit {MAX_INT_DIGITS})"
            )
        return int(digits)

    return parse


def short_repr(value: object, limit: int = 60) -> str:
    """A repr of `value` cut to `limit` characters, for messages about hostile values: plain
    data as Python spells it, anything else by its type alone (never an object's repr, which
    can carry an address)."""
    text = _plain(value, limit + 1)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(value: object, budget: int, depth: int = 0) -> str:
    """`value` spelled as data, stopping once about `budget` characters are out (and, in a
    hostile pickle's nesting, 8 levels down)."""
    if isinstance(value, bool | float | complex) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() < 200 else "<huge int>"
    if isinstance(value, str | bytes):
        return repr(value[:budget])
    if isinstance(value, tuple | list | dict):
        return _plain_items(value, budget, depth + 1) if depth < 8 else "..."
    return f"<{type(value).__name__}>"


def _plain_items(
    value: tuple[Any, ...] | list[Any] | dict[Any, Any], budget: int, depth: int
) -> str:
    """A container spelled item by item, cut short once `budget` characters are out."""
    if isinstance(value, dict):
        pairs = _first(value.items())
        items = [f"{_plain(k, budget, depth)}: {_plain(v, budget, depth)}" for k, v in pairs]
    else:
        items = [_plain(item, budget, depth) for item in _first(value)]
    parts: list[str] = []
    for item in items:
        parts.append(item)
        if sum(len(p) + 2 for p in parts) > budget:
            break
    if len(parts) < len(value):
        parts.append("...")
    brackets = "[]" if isinstance(value, list) else "()" if isinstance(value, tuple) else "{}"
    tail = "," if isinstance(value, tuple) and len(value) == 1 else ""
    return brackets[0] + ", ".join(parts) + tail + brackets[1]


def _first(items: Iterable[Any], count: int = 32) -> list[Any]:
    """The first `count` of `items` (a hostile container can hold millions)."""
    return list(itertools.islice(items, count))
