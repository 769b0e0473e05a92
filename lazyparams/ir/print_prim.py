"""Printing scalar expressions and naming what the printed text binds.

`Names` gives every var, buffer and symbolic dim a unique Python identifier (`lv`, `lv_1`,
...); `PrimPrinter` writes prim expressions with the fewest parentheses Python needs to read
them back as the same tree. Nodes of later layers (TIR's buffer loads) are spelled by printers
those layers register in `PRIM_NODE_PRINTERS`. Imports `ir` only.
"""

from __future__ import annotations

import dataclasses
import json
import keyword
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lazyparams.errors import LazyParamsError
from lazyparams.ir.names import NameTable
from lazyparams.ir.prim import (
    And,
    BinaryOp,
    Cast,
    CmpOp,
    FloatImm,
    IntImm,
    Intrinsic,
    Not,
    Or,
    PrimExpr,
    PrimVar,
    Select,
    StringImm,
)

ATOM, UNARY, MUL, ADD, CMP, NOT, AND, OR = 8, 7, 6, 5, 4, 3, 2, 1
_PRECEDENCE = {"*": MUL, "/": MUL, "//": MUL, "%": MUL, "+": ADD, "-": ADD, "and": AND, "or": OR}

PRIM_NODE_PRINTERS: dict[type, Callable[[PrimPrinter, Any], str]] = {}
"""Spellings of prim nodes defined above the IR, by node type (the `tir` layer fills it)."""


def quote(text: str) -> str:
    """A double-quoted Python string literal that reads back as `text`."""
    return json.dumps(text, ensure_ascii=False)


def identifier(hint: str) -> str:
    """`hint` made a valid Python identifier that is no keyword."""
    name = re.sub(r"\W", "_", hint) or "v"
    if name[0].isdigit():
        name = "v" + name
    return name + "_" if keyword.iskeyword(name) or name in ("True", "False", "None") else name


def float_text(value: float) -> str:
    """A float literal that reads back bit-exact (`float("nan")` for the non-finite ones)."""
    if math.isfinite(value):
        return repr(value)
    return f'float("{value}")'


class Names:
    """Unique names for the objects one printed function binds, with nested scopes."""

    def __init__(self, reserved: tuple[str, ...] = ("R", "T", "I")) -> None:
        self._names: dict[object, str] = {}
        self._table = NameTable()
        for name in reserved:
            self._table.reserve(name)

    def define(self, obj: object, hint: str) -> str:
        """Give `obj` a name derived from `hint` not used in the current scope."""
        name = self._names[obj] = self._table.fresh(identifier(hint))
        return name

    def share(self, obj: object, other: object) -> str:
        """Give `obj` the name `other` already has (a prim param and the symbolic var it
        defines, printed as one name)."""
        name = self._names[obj] = self._names[other]
        return name

    def __getitem__(self, obj: object) -> str:
        """The name of `obj`; a var used without a definition is named at its first use."""
        if obj not in self._names:
            return self.define(obj, hint_of(obj))
        return self._names[obj]

    def __contains__(self, obj: object) -> bool:
        return obj in self._names

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Names defined inside the block are forgotten after it (sibling loops reuse `i`)."""
        saved_names, saved_table = dict(self._names), self._table.copy()
        try:
            yield
        finally:
            self._names, self._table = saved_names, saved_table


class HintNames(Names):
    """Every object named by its own hint, as is: what messages show, since their reader looks
    the names up in the source they wrote (two vars may then share a name)."""

    def __getitem__(self, obj: object) -> str:
        return hint_of(obj)


def hint_of(obj: object) -> str:
    """The name a var, buffer or dim was given (`name_hint`, else `name`)."""
    return str(getattr(obj, "name_hint", None) or getattr(obj, "name", "v"))


def tuple_text(items: list[str]) -> str:
    """A Python tuple literal of `items`: `(a, b)`, `(a,)`, `()`."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


class PrimPrinter:
    """Writes prim expressions; names of vars and buffers come from `names`."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def __call__(self, expr: PrimExpr) -> str:
        return self.text(expr)[0]

    def text(self, expr: PrimExpr) -> tuple[str, int]:
        """The spelling of `expr` and its precedence (how tightly it binds)."""
        if isinstance(expr, IntImm):
            return _int_text(expr)
        if isinstance(expr, FloatImm):
            return _float_imm_text(expr)
        if isinstance(expr, PrimVar):
            return self.names[expr], ATOM
        if isinstance(expr, BinaryOp):
            return self._binary(expr)
        if isinstance(expr, Not):
            return f"not {self._operand(expr.a, NOT)}", NOT
        return self._call_like(expr), ATOM

    def _binary(self, expr: BinaryOp) -> tuple[str, int]:
        symbol = type(expr).symbol
        if symbol is None:
            return f"T.{type(expr).script_name}({self(expr.a)}, {self(expr.b)})", ATOM
        if isinstance(expr, CmpOp) and not isinstance(expr, And | Or):
            return (
                f"{self._operand(expr.a, CMP + 1)} {symbol} {self._operand(expr.b, CMP + 1)}",
                CMP,
            )
        prec = _PRECEDENCE[symbol]
        return f"{self._operand(expr.a, prec)} {symbol} {self._operand(expr.b, prec + 1)}", prec

    def _operand(self, expr: PrimExpr, needed: int) -> str:
        text, prec = self.text(expr)
        return text if prec >= needed else f"({text})"

    def _call_like(self, expr: PrimExpr) -> str:
        if isinstance(expr, Cast):
            return f"T.Cast({quote(expr.target_dtype)}, {self(expr.value)})"
        if isinstance(expr, Select):
            parts = (expr.condition, expr.true_value, expr.false_value)
            return f"T.if_then_else({', '.join(self(p) for p in parts)})"
        if isinstance(expr, Intrinsic):
            return f"T.{expr.name}({', '.join(self(a) for a in expr.args)})"
        if type(expr) in PRIM_NODE_PRINTERS:
            return PRIM_NODE_PRINTERS[type(expr)](self, expr)
        if isinstance(expr, StringImm):
            return quote(expr.value)
        raise LazyParamsError(
            f"cannot print prim expression {type(expr).__name__}; expected a node of ir.prim"
        )

    def indices(self, indices: tuple[PrimExpr, ...]) -> str:
        """The inside of `A[...]`; a 0-d buffer is indexed with `()`."""
        return ", ".join(self(i) for i in indices) if indices else "()"


def _int_text(expr: IntImm) -> tuple[str, int]:
    if expr.dtype == "bool":
        return str(bool(expr.value)), ATOM
    if expr.dtype == "int64":
        return str(expr.value), UNARY if expr.value < 0 else ATOM
    return f"T.{expr.dtype}({expr.value})", ATOM


def _float_imm_text(expr: FloatImm) -> tuple[str, int]:
    if expr.dtype == "float32" and math.isfinite(expr.value):
        text = repr(float(expr.value))
        return text, UNARY if text.startswith("-") else ATOM
    value = quote(str(expr.value)) if not math.isfinite(expr.value) else repr(float(expr.value))
    return f"T.{expr.dtype}({value})", ATOM


def walk(root: Any) -> Iterator[Any]:
    """Every IR node under `root` (fields in declaration order), each var-like node once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple | list):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            stack.extend(getattr(node, f.name) for f in reversed(dataclasses.fields(node)))


def prim_vars(root: Any, exclude: set[PrimVar] | None = None) -> list[PrimVar]:
    """The PrimVars under `root` in first-appearance order, minus `exclude`."""
    return [n for n in walk(root) if isinstance(n, PrimVar) and n not in (exclude or set())]
