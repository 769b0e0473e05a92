"""Parsing scalar expressions: symbolic dims of Relax shapes and the arithmetic of TIR kernels.

`PrimParser` reads numbers, operators and the `T.*` scalar functions; subclasses say what a
name, a subscript and a string mean where they are used. `literal` reads static values.
Imports `ir` and the script's `source` module.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any, Final

from lazyparams.errors import StructInfoError
from lazyparams.ir.dtype import canonical_dtype, is_dtype, is_float
from lazyparams.ir.prim import (
    BINARY_OPS,
    INTRINSICS,
    And,
    Cast,
    FloatImm,
    IntImm,
    Intrinsic,
    Not,
    Or,
    PrimExpr,
    PrimVar,
    Select,
    Sub,
)
from lazyparams.script.source import Source, show

_SPELLINGS: dict[type[ast.AST], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}  # fmt: skip
"""Python's operators by their spelling; each binary node class declares the spelling it has."""
_BY_SYMBOL = {cls.symbol: cls for cls in BINARY_OPS if cls.symbol is not None}
_BY_NAME = {f"T.{cls.script_name}": cls for cls in BINARY_OPS if cls.script_name}
_SPECIAL_FLOATS = {"inf", "-inf", "nan"}


def number(node: ast.AST) -> int | float | bool | None:
    """The value of a number literal (`3`, `-0.5`, `True`, `float("inf")`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = number(node.operand)
        if inner is None or isinstance(inner, bool):
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if _is_float_call(node):
        assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant)
        return float(str(node.args[0].value))
    return None


def _is_float_call(node: ast.AST) -> bool:
    """`float("inf")`, `float("-inf")` or `float("nan")`: how non-finite floats are spelled."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in _SPECIAL_FLOATS
    )


NO_SCALAR: Final = object()
"""What `scalar_literal` gives for a node that is not a number, string or None."""


def scalar_literal(node: ast.AST) -> Any:
    """A number, string or None written in place, or `NO_SCALAR`."""
    value = number(node)
    if value is not None:
        return value
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    return NO_SCALAR


def literal(src: Source, node: ast.AST, what: str) -> Any:
    """A static value: number, string, None, or a list, tuple or dict of them."""
    value = scalar_literal(node)
    if value is not NO_SCALAR:
        return value
    if isinstance(node, ast.List | ast.Tuple):
        items = [literal(src, e, what) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        keys = [literal(src, k, what) if k is not None else None for k in node.keys]
        return dict(zip(keys, (literal(src, v, what) for v in node.values), strict=True))
    raise src.error(
        node, f"{what}: expected a literal (number, string, list, dict), got {show(node)}"
    )


def dtype_arg(src: Source, node: ast.AST, what: str) -> str:
    """A dtype given as a string literal, in its canonical spelling."""
    if isinstance(node, ast.Constant) and is_dtype(node.value):
        return canonical_dtype(str(node.value))
    raise src.error(node, f'{what}: expected a dtype such as "float32", got {show(node)}')


class PrimParser:
    """Reads a scalar expression; `name`, `subscript` and `string` are the context's hooks."""

    def __init__(self, src: Source) -> None:
        self.src = src

    def expr(self, node: ast.AST) -> PrimExpr:
        """The prim expression `node` spells."""
        method: Callable[[Any], PrimExpr] | None = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise self.src.error(node, f"expected a scalar expression, got {show(node)}")
        return method(node)

    # Hooks ---------------------------------------------------------------------------------

    def name(self, node: ast.Name) -> PrimExpr:
        raise self.src.error(node, f"undefined name {node.id!r}; expected a scalar variable")

    def subscript(self, node: ast.Subscript) -> PrimExpr:
        raise self.src.error(node, f"expected a scalar expression, got subscript {show(node)}")

    def string(self, node: ast.Constant) -> PrimExpr:
        raise self.src.error(node, f"expected a scalar expression, got string {show(node)}")

    # Node kinds ----------------------------------------------------------------------------

    def _Name(self, node: ast.Name) -> PrimExpr:
        return self.name(node)

    def _Subscript(self, node: ast.Subscript) -> PrimExpr:
        return self.subscript(node)

    def _Constant(self, node: ast.Constant) -> PrimExpr:
        if isinstance(node.value, str):
            return self.string(node)
        value = number(node)
        if value is None:
            raise self.src.error(node, f"expected a scalar expression, got {show(node)}")
        return immediate(value)

    def _UnaryOp(self, node: ast.UnaryOp) -> PrimExpr:
        value = number(node)
        if value is not None:
            return immediate(value)
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(operand)
        if isinstance(node.op, ast.USub):
            zero = (
                FloatImm(0.0, operand.dtype)
                if is_float(operand.dtype)
                else IntImm(0, operand.dtype)
            )
            return Sub(zero, operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.src.error(node, f"expected one of the operators - + not, got {show(node)}")

    def _BinOp(self, node: ast.BinOp) -> PrimExpr:
        cls = _BY_SYMBOL.get(_SPELLINGS.get(type(node.op), ""))
        if cls is None:
            raise self.src.error(
                node, f"expected one of the operators + - * / // %, got {show(node)}"
            )
        return cls(self.expr(node.left), self.expr(node.right))

    def _Compare(self, node: ast.Compare) -> PrimExpr:
        if len(node.ops) != 1:
            raise self.src.error(
                node, f"expected a single comparison such as a < b, got {show(node)}"
            )
        cls = _BY_SYMBOL.get(_SPELLINGS.get(type(node.ops[0]), ""))
        if cls is None:
            raise self.src.error(node, f"expected one of == != < <= > >=, got {show(node)}")
        return cls(self.expr(node.left), self.expr(node.comparators[0]))

    def _BoolOp(self, node: ast.BoolOp) -> PrimExpr:
        cls = And if isinstance(node.op, ast.And) else Or
        result = self.expr(node.values[0])
        for value in node.values[1:]:
            result = cls(result, self.expr(value))
        return result

    def _Call(self, node: ast.Call) -> PrimExpr:
        value = number(node)
        if value is not None:
            return immediate(value)
        name = self.src.callee(node)
        if name is None or not name.startswith("T."):
            raise self.src.error(node, f"expected a T.* scalar function, got {show(node.func)}")
        if node.keywords:
            raise self.src.error(node.keywords[0], f"{name}: expected no keyword arguments")
        return self.call(name, node)

    def call(self, name: str, node: ast.Call) -> PrimExpr:
        """A `T.<name>(...)` scalar call: two-operand functions, selects, casts, immediates."""
        if name in _BY_NAME:
            a, b = self._args(node, 2, name)
            return _BY_NAME[name](self.expr(a), self.expr(b))
        if name in ("T.if_then_else", "T.Select"):
            c, a, b = self._args(node, 3, name)
            return Select(self.expr(c), self.expr(a), self.expr(b))
        if name == "T.Cast":
            dtype, value = self._args(node, 2, name)
            return Cast(dtype_arg(self.src, dtype, name), self.expr(value))
        if is_dtype(name[2:]):
            return self._typed(canonical_dtype(name[2:]), node)
        if name[2:] in INTRINSICS:
            args = self._args(node, INTRINSICS[name[2:]], name)
            return Intrinsic(name[2:], tuple(self.expr(a) for a in args))
        raise self.src.error(node.func, f"expected a T.* scalar function, got unknown {name}")

    def _typed(self, dtype: str, node: ast.Call) -> PrimExpr:
        """`T.float32(0.5)` is an immediate of that dtype; `T.float32(x)` casts `x`."""
        (arg,) = self._args(node, 1, f"T.{dtype}")
        value = number(arg)
        if isinstance(arg, ast.Constant) and arg.value in _SPECIAL_FLOATS:
            value = float(arg.value)
        if value is None:
            return Cast(dtype, self.expr(arg))
        try:
            return immediate(value, dtype)
        except StructInfoError as err:
            raise self.src.error(arg, str(err)) from None

    def _args(self, node: ast.Call, count: int, name: str) -> list[ast.expr]:
        if len(node.args) != count or any(isinstance(a, ast.Starred) for a in node.args):
            plural = "s" if count != 1 else ""
            raise self.src.error(
                node, f"{name}: expected {count} argument{plural}, got {len(node.args)}"
            )
        return list(node.args)


def immediate(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """An immediate: bare ints are int64, floats float32, bools bool, unless `dtype` says."""
    if dtype is None:
        dtype = (
            "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
        )
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise StructInfoError(f"expected an integer value for {dtype}, got {value!r}")
    return IntImm(int(value), dtype)


class SymParser(PrimParser):
    """Symbolic dims: names are declared vars (`n = T.int64()`); strings like "n" may declare.

    A name met first in a string becomes a new int64 var of the function, as in signatures,
    where dims are spelled as strings because Python evaluates annotations.
    """

    def __init__(self, src: Source, symbols: dict[str, PrimVar]) -> None:
        super().__init__(src)
        self.symbols = symbols
        self._implicit = False

    def name(self, node: ast.Name) -> PrimExpr:
        if node.id in self.symbols:
            return self.symbols[node.id]
        if self._implicit:
            var = self.symbols[node.id] = PrimVar(node.id, "int64")
            return var
        raise self.src.error(
            node,
            f"undefined symbolic variable {node.id!r}; expected it declared as "
            f'{node.id} = T.int64() at the start of the function, or written as "{node.id}"',
        )

    def string(self, node: ast.Constant) -> PrimExpr:
        inner = parse_embedded(self.src, node)
        saved, self._implicit = self._implicit, True
        try:
            return self.expr(inner)
        finally:
            self._implicit = saved


def parse_embedded(src: Source, node: ast.Constant) -> ast.expr:
    """Parse the expression inside a string literal, its locations moved into the file."""
    try:
        inner = ast.parse(str(node.value).strip(), mode="eval").body
    except SyntaxError:
        message = f"expected a dim expression inside the string, got {show(node)}"
        raise src.error(node, message) from None
    for sub in ast.walk(inner):
        if isinstance(sub, ast.expr):
            sub.col_offset = node.col_offset + 1 + sub.col_offset
            sub.lineno = node.lineno
    return inner
