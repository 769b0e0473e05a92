"""What is wrong with a .npy header that numpy refused, in our words and with the byte.

numpy's own messages pass on ast's (`malformed node or string on line 1: <ast.Name object at
0x...>`); this reads the header text again with `ast` only to say which part is not what a
header holds. It decides nothing: numpy's parse stays the one that accepts. Imports the
standard library and numpy.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import numpy.lib.format as npy

_KEYS = ("descr", "fortran_order", "shape")
_EXPECTED = "a dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}"
_NODE_WORDS = {
    ast.Name: "a name",
    ast.Call: "a call",
    ast.Attribute: "an attribute",
    ast.BinOp: "an arithmetic expression",
    ast.Set: "a set",
    ast.Lambda: "a lambda",
    ast.List: "a list",
    ast.Tuple: "a tuple",
}


def header_problem(text: str, start: int) -> str:
    """Why `text`, the header found at byte `start` of the array, is not a .npy header."""
    try:
        tree = ast.parse(text.strip(" \n\x00"), mode="eval")
    except SyntaxError as err:
        return _syntax_problem(text, start, err)
    except (ValueError, RecursionError, MemoryError):
        return f"the header text is not a Python literal; expected {_EXPECTED}"
    if not isinstance(tree.body, ast.Dict):
        return f"the header is {_kind(tree.body)}, not a dict; expected {_EXPECTED}"
    foreign = _first_foreign(tree.body)
    if foreign is not None:
        at = _byte(text, foreign.lineno, foreign.col_offset, start)
        return f"byte {at} holds {_kind(foreign)}, where a header holds only literals"
    try:
        fields = ast.literal_eval(tree.body)
    except Exception:  # literals that do not combine: -'a', a list as a key, {**x}
        return f"the header's literals do not make a dict; expected {_EXPECTED}"
    return _field_problem(fields)


def _syntax_problem(text: str, start: int, err: SyntaxError) -> str:
    """What a header that does not parse as Python gets wrong, and where."""
    long_int = re.search(r"[0-9]{4301,}", text)
    if long_int is not None:
        digits = len(long_int.group())
        return f"an integer of {digits} digits at byte {start + long_int.start()}; expected a shape"
    at = _byte(text, err.lineno or 1, max((err.offset or 1) - 1, 0), start, utf8=False)
    if "nested" in (err.msg or ""):
        return f"brackets nest too deep (at byte {at}); expected {_EXPECTED}"
    return f"a syntax error at byte {at}; expected {_EXPECTED}"


def _field_problem(fields: dict[Any, Any]) -> str:
    """What is wrong with a header dict made of literals."""
    if set(fields) != set(_KEYS) or len(fields) != len(_KEYS):
        keys = ", ".join(sorted(repr(k)[:40] for k in fields)) or "none"
        return f"the header's keys are {keys}; expected exactly 'descr', 'fortran_order', 'shape'"
    shape = fields["shape"]
    if not isinstance(shape, tuple):
        return f"'shape' is a {type(shape).__name__}; expected a tuple of ints"
    other = next((d for d in shape if type(d) is not int), None)
    if other is not None or any(type(d) is not int for d in shape):
        return f"'shape' holds a {type(other).__name__}; expected a tuple of ints"
    if not isinstance(fields["fortran_order"], bool):
        return "'fortran_order' is not True or False"
    try:
        npy.descr_to_dtype(fields["descr"])
    except Exception:  # numpy refuses a bad descr with many exception types
        return "'descr' does not describe a dtype numpy knows (such as '<f4')"
    return f"numpy cannot read it; expected {_EXPECTED}"


def _first_foreign(node: ast.AST) -> ast.expr | None:
    """The first part of `node` that is not a literal a header may hold."""
    for child in ast.walk(node):
        if isinstance(child, ast.expr) and not isinstance(child, _LITERALS):
            return child
    return None


_LITERALS = (ast.Dict, ast.Tuple, ast.List, ast.Constant, ast.UnaryOp, ast.USub, ast.UAdd)


def _kind(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"a constant of type {type(node.value).__name__}"
    return _NODE_WORDS.get(type(node), "an expression")


def _byte(text: str, line: int, column: int, start: int, utf8: bool = True) -> int:
    """The byte of the array where (`line`, `column`) of the stripped header text is; a node's
    column counts UTF-8 bytes, the header is latin-1 (one byte a character)."""
    body = text.lstrip(" \n\x00")
    lines = body.split("\n")
    line = min(max(line, 1), len(lines))
    chars = column
    if utf8:
        chars = len(lines[line - 1].encode("utf-8")[:column].decode("utf-8", "ignore"))
    before = sum(len(part) + 1 for part in lines[: line - 1])
    return start + (len(text) - len(body)) + before + chars
