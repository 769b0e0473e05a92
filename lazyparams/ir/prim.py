"""Scalar (prim) expressions: symbolic shape dims and the arithmetic of TIR kernels.

Shapes in struct info and every expression inside a PrimFunc are built from these nodes. Vars
compare by identity; the other nodes are values. Imports `ir.dtype` and the errors only.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from lazyparams.errors import StructInfoError
from lazyparams.ir.dtype import is_float


class PrimExpr(ABC):
    """Base of scalar expressions; arithmetic operators build new expressions (folding ints)."""

    __slots__ = ()

    @property
    @abstractmethod
    def dtype(self) -> str:
        """The scalar dtype this expression evaluates to."""

    def __add__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Add, self, other)

    def __radd__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Add, other, self)

    def __sub__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Sub, self, other)

    def __rsub__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Sub, other, self)

    def __mul__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Mul, self, other)

    def __rmul__(self, other: PrimExpr | int | float) -> PrimExpr:
        return _fold(Mul, other, self)

    def __floordiv__(self, other: PrimExpr | int) -> PrimExpr:
        return _fold(FloorDiv, self, other)

    def __mod__(self, other: PrimExpr | int) -> PrimExpr:
        return _fold(FloorMod, self, other)

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


@dataclass(frozen=True, slots=True)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    value: int
    imm_dtype: str = "int64"

    @property
    def dtype(self) -> str:
        return self.imm_dtype


@dataclass(frozen=True, slots=True)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float
    imm_dtype: str = "float32"

    @property
    def dtype(self) -> str:
        return self.imm_dtype


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


class Add(BinaryOp):
    __slots__ = ()
    symbol = "+"


class Sub(BinaryOp):
    __slots__ = ()
    symbol = "-"


class Mul(BinaryOp):
    __slots__ = ()
    symbol = "*"


class Div(BinaryOp):
    """True division (floats)."""

    __slots__ = ()
    symbol = "/"


class FloorDiv(BinaryOp):
    __slots__ = ()
    symbol = "//"
    script_name = "floordiv"


class FloorMod(BinaryOp):
    __slots__ = ()
    symbol = "%"
    script_name = "floormod"


class Min(BinaryOp):
    __slots__ = ()
    script_name = "min"


class Max(BinaryOp):
    __slots__ = ()
    script_name = "max"


class CmpOp(BinaryOp):
    """Base of comparisons and logical connectives; their dtype is bool."""

    __slots__ = ()

    @property
    def dtype(self) -> str:
        return "bool"


class EQ(CmpOp):
    __slots__ = ()
    symbol = "=="


class NE(CmpOp):
    __slots__ = ()
    symbol = "!="


class LT(CmpOp):
    __slots__ = ()
    symbol = "<"


class LE(CmpOp):
    __slots__ = ()
    symbol = "<="


class GT(CmpOp):
    __slots__ = ()
    symbol = ">"


class GE(CmpOp):
    __slots__ = ()
    symbol = ">="


class And(CmpOp):
    __slots__ = ()
    symbol = "and"


class Or(CmpOp):
    __slots__ = ()
    symbol = "or"


@dataclass(frozen=True, slots=True)
class Not(PrimExpr):
    """Logical negation."""

    a: PrimExpr

    @property
    def dtype(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class Cast(PrimExpr):
    """Conversion of a scalar to another dtype (float to int truncates toward zero)."""

    target_dtype: str
    value: PrimExpr

    @property
    def dtype(self) -> str:
        return self.target_dtype


@dataclass(frozen=True, slots=True)
class Select(PrimExpr):
    """`T.if_then_else(cond, a, b)`: a when cond holds, else b."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


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
