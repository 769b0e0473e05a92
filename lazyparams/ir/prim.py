"""Scalar (prim) expressions: symbolic shape dims and the arithmetic of TIR kernels.

Shapes in struct info and every expression inside a PrimFunc are built from these nodes. Vars
compare by identity; the other nodes are values. Imports `ir.dtype` and the errors only.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, TypeAlias

from lazyparams.errors import StructInfoError
from lazyparams.ir.dtype import is_float

_Operand: TypeAlias = "PrimExpr | int | float"


_Method: TypeAlias = "Callable[[PrimExpr, _Operand], PrimExpr]"


def _folding(symbol: str) -> tuple[_Method, _Method]:
    """The operator methods `self <symbol> other` and its reflection `other <symbol> self`."""
    # the node classes are defined below this base; they are found by spelling when called

    def forward(self: PrimExpr, other: _Operand) -> PrimExpr:
        return _fold(_NODE_OF_SYMBOL[symbol], self, other)

    def reflected(self: PrimExpr, other: _Operand) -> PrimExpr:
        return _fold(_NODE_OF_SYMBOL[symbol], other, self)

    return forward, reflected


class PrimExpr(ABC):
    """Base of scalar expressions; arithmetic operators build new expressions (folding ints)."""

    __slots__ = ()

    @property
    @abstractmethod
    def dtype(self) -> str:
        """The scalar dtype this expression evaluates to."""

    __add__, __radd__ = _folding("+")
    __sub__, __rsub__ = _folding("-")
    __mul__, __rmul__ = _folding("*")
    __floordiv__ = _folding("//")[0]
    __mod__ = _folding("%")[0]

    def __neg__(self) -> PrimExpr:
        return _fold(Sub, 0, self)


@dataclass(frozen=True, slots=True, eq=False)
class PrimVar(PrimExpr):
    """A scalar variable: a symbolic dim, a loop var or a block iter var. Compares by identity."""

    name: str
    var_dtype: str = "int64"

    @property
    def dtype(self) -> str:
        return self.var_dtype

    def __repr__(self) -> str:
        return f"PrimVar({self.name!r})"


class _Immediate(PrimExpr):
    """Base of numeric constants, whose dtype is a field."""

    __slots__ = ()
    imm_dtype: str

    @property
    def dtype(self) -> str:
        return self.imm_dtype


@dataclass(frozen=True, slots=True)
class IntImm(_Immediate):
    """An integer (or bool) constant."""

    value: int
    imm_dtype: str = "int64"


@dataclass(frozen=True, slots=True)
class FloatImm(_Immediate):
    """A floating-point constant."""

    value: float
    imm_dtype: str = "float32"


@dataclass(frozen=True, slots=True)
class StringImm(PrimExpr):
    """A string constant inside TIR (rare; kept for completeness of the printer)."""

    value: str

    @property
    def dtype(self) -> str:
        return "handle"


@dataclass(frozen=True, slots=True)
class BinaryOp(PrimExpr):
    """Base of two-operand nodes; `symbol` is the infix spelling, or None for a call spelling.

    Its subclasses add no fields, so they are not dataclasses of their own: they inherit these
    methods (equality checks the class too), and a dataclass each would cost more start-up
    than the rest of this module."""

    a: PrimExpr
    b: PrimExpr
    symbol: ClassVar[str | None] = None
    script_name: ClassVar[str] = ""

    @property
    def dtype(self) -> str:
        return self.a.dtype


class _Predicate(PrimExpr):
    """Base of nodes whose dtype is bool: comparisons, connectives and negation."""

    __slots__ = ()

    @property
    def dtype(self) -> str:
        return "bool"


class CmpOp(_Predicate, BinaryOp):
    """Base of comparisons and logical connectives."""

    __slots__ = ()


def _binary_op(
    name: str, symbol: str | None, script_name: str = "", base: type[BinaryOp] = BinaryOp
) -> type[BinaryOp]:
    """A two-operand node class: `base` with its spellings (infix, and `T.<name>` where the
    script calls it) and no fields of its own."""
    spellings = {"symbol": symbol, "script_name": script_name}
    namespace = {"__slots__": (), "__module__": __name__, "__qualname__": name, **spellings}
    return type(name, (base,), namespace)


Add = _binary_op("Add", "+")
Sub = _binary_op("Sub", "-")
Mul = _binary_op("Mul", "*")
Div = _binary_op("Div", "/")  # true division (floats)
FloorDiv = _binary_op("FloorDiv", "//", "floordiv")
FloorMod = _binary_op("FloorMod", "%", "floormod")
Min = _binary_op("Min", None, "min")
Max = _binary_op("Max", None, "max")
EQ = _binary_op("EQ", "==", base=CmpOp)
NE = _binary_op("NE", "!=", base=CmpOp)
LT = _binary_op("LT", "<", base=CmpOp)
LE = _binary_op("LE", "<=", base=CmpOp)
GT = _binary_op("GT", ">", base=CmpOp)
GE = _binary_op("GE", ">=", base=CmpOp)
And = _binary_op("And", "and", base=CmpOp)
Or = _binary_op("Or", "or", base=CmpOp)


@dataclass(frozen=True, slots=True)
class Not(_Predicate):
    """Logical negation."""

    a: PrimExpr


@dataclass(frozen=True, slots=True)
class Select(PrimExpr):
    """`T.if_then_else(cond, a, b)`: a when cond holds, else b."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


@dataclass(frozen=True, slots=True)
class Cast(PrimExpr):
    """Conversion of a scalar to another dtype (float to int truncates toward zero)."""

    target_dtype: str
    value: PrimExpr

    @property
    def dtype(self) -> str:
        return self.target_dtype


INTRINSICS: dict[str, int] = {
    "abs": 1,
    "round": 1,
    "floor": 1,
    "ceil": 1,
    "trunc": 1,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "tanh": 1,
    "sigmoid": 1,
}
"""Math intrinsics callable as `T.<name>(x)`, with their arity."""


@dataclass(frozen=True, slots=True)
class Intrinsic(PrimExpr):
    """A math intrinsic applied to scalars, such as `T.round(x)`; see `INTRINSICS`."""

    name: str
    args: tuple[PrimExpr, ...] = field(default=())

    @property
    def dtype(self) -> str:
        return self.args[0].dtype


BINARY_OPS: tuple[type[BinaryOp], ...] = (
    Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or
)  # fmt: skip
"""Every two-operand node class; the parser builds its operator tables from their spellings."""

_NODE_OF_SYMBOL = {op.symbol: op for op in BINARY_OPS if op.symbol is not None}


def operands(expr: PrimExpr) -> tuple[PrimExpr, ...]:
    """The prim expressions directly inside `expr`, in field order (a load's indices too).

    Generic over the node fields, so nodes of higher layers (`tir.BufferLoad`) are covered.
    """
    if not dataclasses.is_dataclass(expr):
        return ()
    found: list[PrimExpr] = []
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, PrimExpr):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(v for v in value if isinstance(v, PrimExpr))
    return tuple(found)


def as_prim(value: PrimExpr | int | float | bool) -> PrimExpr:
    """Wrap a Python number as an immediate; pass prim expressions through."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if isinstance(value, int):
        return IntImm(value)
    if isinstance(value, float):
        return FloatImm(value)
    raise StructInfoError(
        f"expected a prim expression or a number, got {type(value).__name__} {value!r:.60}"
    )


def _fold(node: type[BinaryOp], a: PrimExpr | int | float, b: PrimExpr | int | float) -> PrimExpr:
    """Build `node(a, b)`, folding integer constants so static shapes stay plain ints."""
    pa, pb = as_prim(a), as_prim(b)
    if isinstance(pa, IntImm) and isinstance(pb, IntImm) and pa.dtype != "bool":
        folded = _INT_FOLD.get(node)
        if folded is not None and not (node in (FloorDiv, FloorMod) and pb.value == 0):
            return IntImm(folded(pa.value, pb.value), pa.dtype)
    if node is Mul and _is_int_value(pb, 1):
        return pa
    if node in (Add, Sub) and _is_int_value(pb, 0):
        return pa
    if node in (Add, Mul) and isinstance(pa, IntImm) and not isinstance(pb, IntImm):
        return _fold(node, pb, pa) if not _is_int_value(pa, 0 if node is Add else 1) else pb
    return node(pa, pb)


def _is_int_value(expr: PrimExpr, value: int) -> bool:
    return isinstance(expr, IntImm) and expr.value == value and not is_float(expr.dtype)


_INT_FOLD: dict[type[BinaryOp], Callable[[int, int], int]] = {
    Add: lambda x, y: x + y,
    Sub: lambda x, y: x - y,
    Mul: lambda x, y: x * y,
    FloorDiv: lambda x, y: x // y,
    FloorMod: lambda x, y: x % y,
    Min: min,
    Max: max,
}


def const_int(expr: PrimExpr) -> int | None:
    """The value of an integer immediate, or None for anything symbolic."""
    return expr.value if isinstance(expr, IntImm) else None
