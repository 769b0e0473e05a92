"""Bounds on an untrusted state-dict pickle: the opcodes it may use, the work it may cost, and
the walk that turns its nested dicts into unique tensor names.

The opcode table keeps the binary opcodes `torch.save` writes and refuses every other one (sets,
object construction, extensions, text protocol forms). Each step costs one unit, or three for one
that builds a container, and the whole load gets `MAX_PICKLE_STEPS`: memory and time stay
bounded whatever the bytes. Imports the standard library and io.limits.
"""

from __future__ import annotations

import collections
import pickle
import pickletools
from collections.abc import Callable, Mapping
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.limits import check_name

MAX_PICKLE_BYTES = 32 * 1024 * 1024
"""The largest data.pkl read."""
MAX_PICKLE_STEPS = 1_000_000
"""The work a load may do: about 25,000 tensors per file, or 32 MiB of objects at most."""
MAX_DEPTH = 64
"""How deep dicts may nest in a state dict."""
MAX_ENTRIES = 200_000
"""Dict entries the walk visits at most (a dict shared under several keys counts each time)."""

_SIMPLE = [
    *("PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "NONE", "NEWTRUE", "NEWFALSE"),
    *("BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "BINUNICODE", "SHORT_BINUNICODE"),
    *("BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINSTRING", "SHORT_BINSTRING", "APPEND"),
    *("APPENDS", "SETITEM", "SETITEMS", "GLOBAL", "STACK_GLOBAL", "BINGET", "LONG_BINGET"),
    *("BINPUT", "LONG_BINPUT", "MEMOIZE", "EMPTY_TUPLE"),
]
_CONTAINERS = ["EMPTY_LIST", "LIST", "EMPTY_DICT", "DICT", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"]
_CONTAINERS += ["REDUCE", "BINPERSID"]
_CONTAINER_COST = 3
_CODES = {op.name: op.code.encode("latin-1")[0] for op in pickletools.opcodes}
_NAMES = {code: name for name, code in _CODES.items()}

Handler = Callable[[Any], None]


class StateDictRefused(pickle.UnpicklingError):
    """A pickle our bounds refuse (as opposed to one pickle itself cannot read); its message
    is ours and says what was refused."""


def restricted_dispatch(base: Mapping[int, Handler]) -> dict[int, Handler]:
    """An opcode table for pickle's pure-Python unpickler: `base`'s handlers for the opcodes a
    state dict uses (each charged to the load's steps), a BUILD that only touches an
    OrderedDict, and a refusal for every other byte."""
    table: dict[int, Handler] = {code: _refused(code) for code in range(256)}
    for name in _SIMPLE:
        table[_CODES[name]] = _charged(base[_CODES[name]], 1)
    for name in _CONTAINERS:
        table[_CODES[name]] = _charged(base[_CODES[name]], _CONTAINER_COST)
    table[_CODES["BUILD"]] = _charged(_build, 1)
    return table


def _charged(handler: Handler, cost: int) -> Handler:
    """`handler`, first taking `cost` from the load's steps left (refused once none are)."""

    def run(unpickler: Any) -> None:
        unpickler.steps_left -= cost
        if unpickler.steps_left < 0:
            raise StateDictRefused(
                f"more than {MAX_PICKLE_STEPS} steps; expected a state dict of bounded size"
            )
        handler(unpickler)

    return run


def _refused(code: int) -> Handler:
    """A handler refusing opcode `code` by name."""
    name = _NAMES.get(code, f"byte 0x{code:02x}")

    def refuse(_unpickler: Any) -> None:
        raise StateDictRefused(f"opcode {name} is not used by state dicts and not allowed")

    return refuse


def _build(unpickler: Any) -> None:
    """BUILD: only an OrderedDict's state (torch's `_metadata`), which is dropped."""
    stack = unpickler.stack
    stack.pop()
    if type(stack[-1]) is not collections.OrderedDict:
        raise StateDictRefused(
            f"BUILD on a {type(stack[-1]).__name__}; only an OrderedDict's state is allowed"
        )


def flatten_state_dict(root: dict[Any, Any], where: str, leaf: type) -> dict[str, Any]:
    """name -> value of every `leaf` in the nested dicts under `root`, keys joined with '.'.

    Refuses nesting past MAX_DEPTH, a dict inside itself, more than MAX_ENTRIES entries, keys
    that are neither str nor int above a tensor, and two key paths giving one name.
    """
    found: dict[str, Any] = {}
    paths: dict[str, tuple[tuple[str, ...], str]] = {}
    stack: list[tuple[tuple[str, ...], str, Any]] = [((), "", iter(root.items()))]
    open_dicts = [id(root)]
    kinds = (dict, leaf)
    for visited in range(MAX_ENTRIES + 1):
        while stack and (entry := next(stack[-1][2], None)) is None:
            stack.pop()
            open_dicts.pop()
        if not stack:
            return found
        if visited == MAX_ENTRIES:
            raise CheckpointError(f"{where}: more than {MAX_ENTRIES} dict entries")
        assert entry is not None  # the loop above leaves only with an entry or no stack
        key, value = entry
        if not isinstance(value, kinds):
            continue
        parts, prefix, _items = stack[-1]
        part = _key(key, parts, where)
        if isinstance(value, dict):
            child = (*parts, part)
            _check_nesting(value, child, open_dicts, where)
            stack.append((child, f"{prefix}{part}.", iter(value.items())))
            open_dicts.append(id(value))
        else:
            _add(found, paths, f"{prefix}{part}", (parts, part), value, where)
    raise AssertionError("unreachable: the loop returns or raises")


def _key(key: object, path: tuple[str, ...], where: str) -> str:
    """A dict key as a name part: a str as it is, an int in decimal; others refused."""
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    if not isinstance(key, str):
        raise CheckpointError(
            f"{where}: key {key!r:.60} under {_dotted(path)!r} is a {type(key).__name__}; "
            "expected str or int keys above tensors"
        )
    return key


def _check_nesting(value: dict[Any, Any], path: tuple[str, ...], open_dicts: list[int],
                   where: str) -> None:  # fmt: skip
    """Refuse a dict already open above itself, or one nested past MAX_DEPTH."""
    if id(value) in open_dicts:
        raise CheckpointError(f"{where}: the dict at {_dotted(path)!r:.200} contains itself")
    if len(path) >= MAX_DEPTH:
        raise CheckpointError(
            f"{where}: dicts nest deeper than {MAX_DEPTH} levels (at {_dotted(path)!r:.200})"
        )


def _add(found: dict[str, Any], paths: dict[str, tuple[tuple[str, ...], str]], name: str,
         path: tuple[tuple[str, ...], str], value: object, where: str) -> None:  # fmt: skip
    """Record the tensor `name`, refusing a second key path to the same name."""
    if name in found:
        first = [*paths[name][0], paths[name][1]]
        raise CheckpointError(
            f"{where}: tensor name {name!r} comes from two key paths, {first!r} and "
            f"{[*path[0], path[1]]!r}; expected unique names after joining keys with '.'"
        )
    found[check_name(name, where)] = value
    paths[name] = path


def _dotted(path: tuple[str, ...]) -> str:
    """The key path as the name it gives."""
    return ".".join(path)
