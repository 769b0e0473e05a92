"""Relax expressions, bindings, blocks and functions.

Frozen slotted dataclasses; every node compares by identity (`is`), structure is compared by
`ir.structural`. Vars carry their struct info; other nodes get theirs from `ir.infer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lazyparams.ir.prim import PrimExpr, as_prim
from lazyparams.ir.struct_info import StructInfo

if TYPE_CHECKING:
    import numpy as np


class Expr:
    """Base of Relax expressions."""

    __slots__ = ()


class BaseFunc:
    """Base of what an IRModule holds: Relax `Function`s and TIR `PrimFunc`s."""

    __slots__ = ()
    attrs: Mapping[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    """A variable bound once: a function param or the left side of a binding."""

    name_hint: str
    struct_info: StructInfo | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name_hint!r})"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DataflowVar(Var):
    """A var local to a dataflow block; it may not be used after the block ends."""


@dataclass(frozen=True, slots=True, eq=False)
class GlobalVar(Expr):
    """The name of a function of the module (`cls.f`); compared by name structurally."""

    name_hint: str


@dataclass(frozen=True, slots=True, eq=False)
class ExternFunc(Expr):
    """A packed function resolved by name at run time (`R.call_packed("name", ...)`).

    The VM looks the name up when the call runs, in its own table first, then in the global
    registry (`runtime.register_func`): a function registered after the VM was made is found.
    """

    global_symbol: str


@dataclass(frozen=True, slots=True, eq=False)
class Op(Expr):
    """A registered operator such as `permute_dims`: its struct info inference and purity live
    in the op registry under `name`, its kernel in the runtime."""

    name: str


@dataclass(frozen=True, slots=True, eq=False)
class Constant(Expr):
    """A tensor constant held as a numpy array."""

    data: np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True, eq=False)
class PrimValue(Expr):
    """A scalar value (`R.prim_value(1)`): an immediate, or an expression over the symbolic
    dims of the function's shapes."""

    value: PrimExpr


@dataclass(frozen=True, slots=True, eq=False)
class StringImm(Expr):
    """A string value (`R.str("name")`)."""

    value: str


@dataclass(frozen=True, slots=True, eq=False)
class ShapeExpr(Expr):
    """A shape value (`R.shape([n, 4])`)."""

    values: tuple[PrimExpr, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Tuple(Expr):
    """A tuple of values (`(a, b)`)."""

    fields: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(Expr):
    """Field `index` of a tuple value (`params[i]`), with 0 <= index < the tuple's length; a
    value known only as `R.Object` gives an `R.Object`."""

    tuple_value: Expr
    index: int


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    """A call of an op, an extern, a global function or a function-typed var.

    `attrs` holds an op's non-tensor arguments (axes, dtype, ...); `sinfo_args` declares the
    result struct info where it cannot be inferred (`call_tir`, `call_packed`).
    """

    op: Expr
    args: tuple[Expr, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    sinfo_args: tuple[StructInfo, ...] = ()


class Binding:
    """Base of the two binding kinds."""

    __slots__ = ()
    var: Var
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class VarBinding(Binding):
    """`var = value`."""

    var: Var
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class MatchCast(Binding):
    """`var = R.match_cast(value, struct_info)`: checks at run time, binds symbolic dims."""

    var: Var
    value: Expr
    struct_info: StructInfo


@dataclass(frozen=True, slots=True, eq=False)
class BindingBlock:
    """A sequence of bindings executed in order."""

    bindings: tuple[Binding, ...]


@dataclass(frozen=True, slots=True, eq=False)
class DataflowBlock(BindingBlock):
    """A block of pure bindings (`with R.dataflow():`) whose DataflowVars stay inside."""


@dataclass(frozen=True, slots=True, eq=False)
class SeqExpr(Expr):
    """Blocks of bindings followed by the result expression."""

    blocks: tuple[BindingBlock, ...]
    body: Expr


@dataclass(frozen=True, slots=True, eq=False)
class If(Expr):
    """`if cond: ... else: ...` as a value: each branch a SeqExpr whose body is the result.

    `cond` is a 0-d bool tensor or a prim bool; a branch given as a bare expression is wrapped
    into a SeqExpr with no blocks (as a normalised If always has SeqExpr branches). Vars bound
    inside a branch are local to it.
    """

    cond: Expr
    true_branch: SeqExpr
    false_branch: SeqExpr

    def __post_init__(self) -> None:
        for name in ("true_branch", "false_branch"):
            branch = getattr(self, name)
            if not isinstance(branch, SeqExpr):
                object.__setattr__(self, name, SeqExpr((), branch))

    def with_branches(self, rewrite: Callable[[SeqExpr], SeqExpr], cond: Expr | None = None) -> If:
        """This If with each branch rewritten (and `cond`, if given); itself when nothing
        changed, so a pass can tell an untouched If by identity."""
        true_branch, false_branch = rewrite(self.true_branch), rewrite(self.false_branch)
        cond = self.cond if cond is None else cond
        unchanged = (cond, true_branch, false_branch) == (
            self.cond,
            self.true_branch,
            self.false_branch,
        )
        return self if unchanged else If(cond, true_branch, false_branch)


PRIVATE = "private"
"""The Function attr marking a function that is not public (`@R.function(private=True)`):
passes meant for every public function, as TVM's callback passes are, leave it alone."""


@dataclass(frozen=True, slots=True, eq=False)
class Function(Expr, BaseFunc):
    """A Relax function. `attrs` may hold `num_input`, `global_symbol`, `PRIVATE` and recorded
    names."""

    params: tuple[Var, ...]
    body: SeqExpr
    ret_struct_info: StructInfo
    is_pure: bool = True
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def bindings(self) -> list[Binding]:
        """Every binding of the body, in order."""
        return [b for block in self.body.blocks for b in block.bindings]

    @property
    def is_public(self) -> bool:
        """Whether the function is public (not marked `PRIVATE`)."""
        return self.attrs.get(PRIVATE) is not True

    def with_attr(self, key: str, value: Any) -> Function:
        """A copy with one attribute set."""
        return Function(
            self.params, self.body, self.ret_struct_info, self.is_pure, {**self.attrs, key: value}
        )


def prim_value(value: int | PrimExpr) -> PrimValue:
    """`R.prim_value(value)` from a Python int or a prim expression."""
    return PrimValue(as_prim(value))


__all__ = [
    "BaseFunc",
    "Binding",
    "BindingBlock",
    "Call",
    "Constant",
    "DataflowBlock",
    "DataflowVar",
    "Expr",
    "ExternFunc",
    "Function",
    "GlobalVar",
    "If",
    "MatchCast",
    "Op",
    "PrimValue",
    "SeqExpr",
    "ShapeExpr",
    "StringImm",
    "Tuple",
    "TupleGetItem",
    "Var",
    "VarBinding",
    "prim_value",
]
