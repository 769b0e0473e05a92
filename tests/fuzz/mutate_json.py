"""Structural mutations of JSON: safetensors headers and the index files of sharded folders.

The text is parsed keeping duplicate keys (objects become `Pairs`), one node is changed (a value
set to an extreme number, a deep nesting, a wrong type, a hostile name; a key duplicated,
dropped or renamed) and the tree is written back, `Raw` pieces verbatim.
"""

from __future__ import annotations

import json
import random
import struct
from typing import Any


class Pairs(list[Any]):
    """A JSON object as its (key, value) pairs, so duplicates survive."""


class Raw(str):
    """JSON text written as it is (nestings and numbers too large to build as values)."""


def parse(text: bytes) -> Any:
    """The JSON value of `text`, objects as `Pairs`."""
    return json.loads(text, object_pairs_hook=Pairs)


def dump(value: Any) -> bytes:
    """`value` written as compact JSON text, `Raw` pieces as they are."""
    return _text(value).encode("utf-8", "surrogatepass")


def _text(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{_text(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return json.dumps(value)


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every node under `value` (a path is a tuple of pair or list indices)."""
    found = [path]
    if isinstance(value, list):
        for i, item in enumerate(value):
            child = item[1] if isinstance(value, Pairs) else item
            found += _nodes(child, (*path, i))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for i in path:
        value = value[i][1] if isinstance(value, Pairs) else value[i]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = _get(value, path[:-1])
    if isinstance(parent, Pairs):
        parent[path[-1]] = (parent[path[-1]][0], new)
    else:
        parent[path[-1]] = new
    return value


def nesting(depth: int) -> Raw:
    """A list nested `depth` deep."""
    return Raw("[" * depth + "]" * depth)


HOSTILE_NAMES = ("", "a\x00b", "w\udce9", "../x", "/abs/x", "a/../../b", "x" * 5000, "é.ü", ".")
HOSTILE_NAMES += ("__metadata__", "a.b", "CON", "x\n", "dup")


def hostile_value(rng: random.Random) -> Any:
    """A value a reader must refuse or bound: huge numbers, deep nestings, wrong types."""
    choices: list[Any] = [0, -1, 1, 2**31, 2**32, 2**63, 2**64, 2**70, -(2**63), 1.5, 1e308]
    choices += [Raw("9" * 5000), Raw("-" + "9" * 400), Raw("1e999"), Raw("NaN"), Raw("Infinity")]
    choices += [nesting(rng.choice((64, 1000, 5000, 100_000))), None, True, "", "F32", "U8"]
    choices += [[], Pairs(), [0] * 100, [2**70, 0], [2**40, 2**40], ["1", "2"], [1.5], [-1, 4]]
    choices += [[1] * 100, [[2, 3]], Pairs([("a", 1)]), rng.choice(HOSTILE_NAMES), "x" * 100_000]
    return rng.choice(choices)


def mutate_value(rng: random.Random, tree: Any) -> tuple[Any, str]:
    """Replace one node (often a leaf) with a hostile value."""
    paths = _nodes(tree)
    leaves = [p for p in paths if not isinstance(_get(tree, p), list)]
    path = rng.choice(leaves if leaves and rng.random() < 0.7 else paths)
    new = hostile_value(rng)
    shown = new if len(repr(new)) < 60 else f"{repr(new)[:50]}... ({len(repr(new))} chars)"
    return _set(tree, path, new), f"json node {list(path)} = {shown!r}"


def mutate_key(rng: random.Random, tree: Any) -> tuple[Any, str]:
    """Duplicate, drop or rename one key of one object, or add a key."""
    objects = [p for p in _nodes(tree) if isinstance(_get(tree, p), Pairs)]
    if not objects:
        return mutate_value(rng, tree)
    path = rng.choice(objects)
    pairs = _get(tree, path)
    if not pairs:
        pairs.append((rng.choice(HOSTILE_NAMES), hostile_value(rng)))
        return tree, f"json object {list(path)}: add a key"
    i = rng.randrange(len(pairs))
    key, value = pairs[i]
    action = rng.choice(("duplicate", "duplicate-other", "drop", "rename", "add"))
    if action == "duplicate":
        pairs.append((key, value))
    elif action == "duplicate-other":
        pairs.append((key, hostile_value(rng)))
    elif action == "drop":
        del pairs[i]
    elif action == "rename":
        pairs[i] = (rng.choice(HOSTILE_NAMES), value)
    else:
        pairs.insert(i, (rng.choice(HOSTILE_NAMES), hostile_value(rng) if i % 2 else value))
    return tree, f"json object {list(path)}: {action} key {key[:40]!r}"


def mutate_json(rng: random.Random, text: bytes) -> tuple[bytes, str]:
    """`text` (JSON) with one node or key changed; garbage bytes if it does not parse."""
    try:
        tree = parse(text)
    except (ValueError, RecursionError):
        return text[: len(text) // 2], "json (unparsable) cut in half"
    for _ in range(8):  # copies: a failed dump must not leave a half-changed tree
        changed, detail = (mutate_key if rng.random() < 0.35 else mutate_value)(rng, parse(text))
        try:
            return dump(changed), detail
        except (TypeError, ValueError, UnicodeError):
            continue
    return text, "json unchanged"


def safetensors_header(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A safetensors file with its JSON header mutated, its length field fixed most times."""
    if len(data) < 8:
        return data, "safetensors header (file too short)"
    (length,) = struct.unpack("<Q", data[:8])
    header, body = data[8 : 8 + length], data[8 + length :]
    new, detail = mutate_json(rng, header)
    if rng.random() < 0.8:
        return struct.pack("<Q", len(new)) + new + body, f"header: {detail}"
    return data[:8] + new + body, f"header (length kept {length}): {detail}"


def safetensors_length(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """The 8-byte header length set to an extreme or to a value just off."""
    (length,) = struct.unpack("<Q", data[:8].ljust(8, b"\0"))
    value = rng.choice(
        [0, 1, 2, length - 1, length + 1, len(data), len(data) - 8, 2**63, 2**64 - 1]
    )
    value %= 2**64
    return struct.pack("<Q", value) + data[8:], f"header length {length} -> {value}"
