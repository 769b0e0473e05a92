"""Liveness of Relax values: where each var is defined and where it is last used.

One result object shared by the lazy passes, the memory scheduler and the VM, so they all agree
on when a value may be freed. Imports `ir` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyparams.ir import (
    Binding,
    Call,
    Constant,
    DataflowVar,
    Expr,
    ExprVisitor,
    ExternFunc,
    Function,
    GlobalVar,
    Op,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)

RESULT = -2
"""`Liveness.last_use` value for vars still used by the function's result expression."""

PARAM = -1
"""`Liveness.defined_at` value for function params."""


class _UseCollector(ExprVisitor):
    """Collects the Relax vars an expression reads, in first-use order, without repeats; vars
    bound inside it (in an If's branches) are its own, not reads."""

    def __init__(self) -> None:
        self.uses: dict[Var, None] = {}
        self.local: set[Var] = set()

    def visit_var_(self, var: Var) -> None:
        if var not in self.local:
            self.uses[var] = None

    def visit_var_def(self, var: Var) -> None:
        self.local.add(var)


def used_vars(expr: Expr) -> list[Var]:
    """The vars `expr` reads, in order of first appearance (nested functions are not entered;
    an If reads what its condition and branches read from outside them)."""
    uses: dict[Var, None] = {}
    if _flat_uses(expr, uses):
        return list(uses)
    collector = _UseCollector()  # an If, a SeqExpr or a function: vars of their own inside
    collector.visit_expr(expr)
    return list(collector.uses)


_VARS = frozenset((Var, DataflowVar))
_LEAVES = frozenset((Constant, PrimValue, ShapeExpr, StringImm, ExternFunc, GlobalVar, Op))


def _flat_uses(expr: Expr, uses: dict[Var, None]) -> bool:
    """Add the vars `expr` reads to `uses`, in order, where it binds none of its own (calls,
    tuples and leaves: nearly every binding); False, `uses` then being partial, otherwise.
    The visitor's walk, without its per-node dispatch."""
    kind = type(expr)  # exact types, as the visitor dispatches on them
    if kind in _VARS and isinstance(expr, Var):
        uses[expr] = None
        return True
    if kind in _LEAVES:
        return True
    if kind is Call and isinstance(expr, Call):
        if not _flat_uses(expr.op, uses):
            return False
        for arg in expr.args:  # operands are most often vars and leaves: no call for them
            arg_kind = type(arg)
            if arg_kind in _VARS and isinstance(arg, Var):
                uses[arg] = None
            elif arg_kind not in _LEAVES and not _flat_uses(arg, uses):
                return False
        return True
    if kind is Tuple and isinstance(expr, Tuple):
        return all(_flat_uses(item, uses) for item in expr.fields)
    if kind is TupleGetItem and isinstance(expr, TupleGetItem):
        return _flat_uses(expr.tuple_value, uses)
    return False


@dataclass(frozen=True, slots=True)
class Liveness:
    """Def/use facts of one function, bindings indexed in body order.

    `defined_at[v]` is the binding index defining v (`PARAM` for params); `last_use[v]` is the
    index of the last binding reading v, or `RESULT` if the result expression reads it; vars
    never read are absent. `dies_at[i]` lists the vars whose last use is binding i, so they may
    be freed right after it.
    """

    bindings: tuple[Binding, ...]
    uses: tuple[tuple[Var, ...], ...]
    defined_at: dict[Var, int]
    last_use: dict[Var, int]
    dies_at: tuple[tuple[Var, ...], ...]
    result_uses: tuple[Var, ...]

    def users(self, var: Var) -> list[int]:
        """Indices of the bindings that read `var`, in order."""
        return [i for i, used in enumerate(self.uses) if var in used]

    def is_dead(self, var: Var) -> bool:
        """True if `var` is defined but never read (not by a binding, not by the result)."""
        return var not in self.last_use


def liveness(func: Function) -> Liveness:
    """Compute the def/use facts of `func` in one forward pass over its bindings."""
    bindings = tuple(func.bindings())
    defined_at: dict[Var, int] = {p: PARAM for p in func.params}
    last_use: dict[Var, int] = {}
    uses: list[tuple[Var, ...]] = []
    for index, binding in enumerate(bindings):
        read = tuple(used_vars(binding.value))
        uses.append(read)
        for var in read:
            last_use[var] = index
        defined_at[binding.var] = index
    result_uses = tuple(used_vars(func.body.body))
    for var in result_uses:
        last_use[var] = RESULT
    dies: list[list[Var]] = [[] for _ in bindings]
    for var, index in last_use.items():
        if index >= 0:
            dies[index].append(var)
    return Liveness(
        bindings, tuple(uses), defined_at, last_use, tuple(tuple(d) for d in dies), result_uses
    )
