"""Text shared by the printers: line wrapping, attr values and constants.

Struct info is spelled in `ir.describe`, which messages share without numpy. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lazyparams.errors import LazyParamsError
from lazyparams.ir.dtype import is_float, is_int
from lazyparams.ir.prim import PrimExpr
from lazyparams.ir.print_prim import float_text, quote, tuple_text

INDENT = "    "
LIMIT = 96
"""Columns a printed line may use inside the module class (100 minus its indentation)."""


def wrapped(prefix: str, parts: list[str], suffix: str, indent: str) -> list[str]:
    """`prefix` + comma-joined `parts` + `suffix` on one line if it fits, else wrapped.

    Wrapped, the parts go on one indented line if that fits, else one part per line.
    """
    line = f"{indent}{prefix}{', '.join(parts)}{suffix}"
    if len(line) <= LIMIT or not parts:
        return [line]
    inner = indent + INDENT
    joined = inner + ", ".join(parts)
    if len(joined) <= LIMIT:
        return [indent + prefix, joined, indent + suffix]
    return [indent + prefix, *(f"{inner}{p}," for p in parts), indent + suffix]


def value_text(value: Any, prim: Callable[[PrimExpr], str], lists: bool = False) -> str:
    """A static value (attr) as a literal; `lists` spells tuples as lists (`axes=[1, 0]`)."""
    if value is None or isinstance(value, bool | np.bool_):
        return str(bool(value)) if value is not None else "None"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return float_text(float(value))
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, PrimExpr):
        return prim(value)
    if isinstance(value, list | tuple):
        items = [value_text(v, prim, lists) for v in value]
        if isinstance(value, list) or lists:
            return f"[{', '.join(items)}]"
        return tuple_text(items)
    if isinstance(value, dict):
        pairs = (
            f"{value_text(k, prim, lists)}: {value_text(v, prim, lists)}" for k, v in value.items()
        )
        return "{" + ", ".join(pairs) + "}"
    raise LazyParamsError(
        f"cannot print attr value {value!r}; expected numbers, strings, lists or dicts"
    )


def attrs_lines(call: str, attrs: Mapping[str, Any], prim: Callable[[PrimExpr], str]) -> list[str]:
    """`R.func_attr({...})`-style line for printable attrs, and a comment naming the others.

    Attrs holding Python objects (callables, arrays) have no script spelling; printing must not
    fail on them, but such a module does not read back equal.
    """
    printable, lines = {}, []
    for key, value in attrs.items():
        try:
            printable[key] = value_text(value, prim)
        except LazyParamsError:
            lines.append(f"# attr {quote(str(key))} holds a {type(value).__name__}: not printable")
    if printable:
        pairs = ", ".join(f"{quote(str(k))}: {v}" for k, v in printable.items())
        lines.insert(0, f"{call}({{{pairs}}})")
    return lines


def const_text(data: np.ndarray[Any, Any], dtype: str) -> str:
    """`R.const(<nested list>, "dtype")`; narrow floats go through float32, exactly."""
    if is_float(dtype) and data.dtype != np.float64:
        data = data.astype(np.float32)
    elif is_int(dtype):
        data = data.astype(np.int64) if dtype != "uint64" else data
    return f"R.const({_nested(data.tolist())}, {quote(dtype)})"


def _nested(value: Any) -> str:
    if isinstance(value, list):
        return f"[{', '.join(_nested(v) for v in value)}]"
    return float_text(value) if isinstance(value, float) else str(value)
