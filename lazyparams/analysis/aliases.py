"""Alias analysis: which storage each var of a function may hold.

A var holds the storage of its *roots*: itself, and the roots of what its value reads without
copying (a var copy or match_cast, a tuple's fields, a tuple field, either result of an If, the
arguments of a Relax function call, which may return them). The memory model and the kill plan
both read it, so the predicted peak and the kills the passes insert agree. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lazyparams.ir import (
    Binding,
    Call,
    Expr,
    GlobalVar,
    If,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
)

Roots = frozenset[Var]


class Aliases:
    """The roots of every var bound so far, and of each field of the vars bound to a tuple
    literal (so `t[0]` holds its first field's storage only).

    `loads` maps a var reading a weight the lazy form loads to the var of that weight's first
    read: the first read is a fresh value, a later read or copy of it is that var itself (the
    lazy form binds each weight once).
    """

    def __init__(self, params: Iterable[Var] = (), loads: Mapping[Var, Var] | None = None) -> None:
        self.roots: dict[Var, Roots] = {p: frozenset((p,)) for p in params}
        self.fields: dict[Var, tuple[Roots, ...]] = {}
        self.loads: Mapping[Var, Var] = loads or {}

    def of(self, var: Var) -> Roots:
        """The roots of `var` (itself alone when it was never bound here)."""
        return self.roots.get(var, frozenset((var,)))

    def of_all(self, vars_: Iterable[Var]) -> Roots:
        """Every root of any of `vars_`."""
        return frozenset().union(*(self.of(v) for v in vars_))

    def bind(self, binding: Binding) -> None:
        """Record the roots of `binding`'s var: itself, plus the storage its value aliases."""
        var, value = binding.var, binding.value
        own = frozenset((var,))
        load = self.loads.get(var)
        if load is not None:
            self.roots[var] = own if load is var else self.of(load)
        elif isinstance(value, If):
            branches = (value.true_branch, value.false_branch)
            self.roots[var] = own.union(*(self._branch_roots(b) for b in branches))
        elif isinstance(value, Call):
            if isinstance(value.op, GlobalVar):  # a Relax function may return its arguments
                own = own.union(*(self.expr(a) for a in value.args))
            self.roots[var] = own
        else:
            self.roots[var] = own | self.expr(value)
            self._bind_fields(var, value)

    def _bind_fields(self, var: Var, value: Expr) -> None:
        if isinstance(value, Tuple):
            self.fields[var] = tuple(self.expr(f) for f in value.fields)
        elif isinstance(value, Var) and value in self.fields:
            self.fields[var] = self.fields[value]

    def _branch_roots(self, branch: SeqExpr) -> Roots:
        """The outer roots an If branch's result may alias (its own values become the If's)."""
        inner = Aliases((), self.loads)
        inner.roots, inner.fields = dict(self.roots), dict(self.fields)
        local: set[Var] = set()
        for block in branch.blocks:
            for binding in block.bindings:
                inner.bind(binding)
                local.add(binding.var)
        return frozenset(r for r in inner.expr(branch.body) if r not in local)

    def expr(self, expr: Expr) -> Roots:
        """The roots an expression reads without copying (a var, tuple fields, a field)."""
        if isinstance(expr, Var):
            return self.of(expr)
        if isinstance(expr, Tuple):
            return frozenset().union(*(self.expr(f) for f in expr.fields))
        if isinstance(expr, TupleGetItem):
            source = expr.tuple_value
            if isinstance(source, Tuple):
                return self.expr(source.fields[expr.index])
            if isinstance(source, Var) and source in self.fields:
                return self.fields[source][expr.index]
            return self.expr(source)
        return frozenset()


def aliases(
    params: Iterable[Var], bindings: Iterable[Binding], loads: Mapping[Var, Var] | None = None
) -> Aliases:
    """The alias facts of a function's `bindings`, in order (see `Aliases` for `loads`)."""
    found = Aliases(params, loads)
    for binding in bindings:
        found.bind(binding)
    return found


def root_readers(found: Aliases, reads: Sequence[Iterable[Var]]) -> dict[Var, set[int]]:
    """For each root, the indices of the bindings reading it through any of its aliases
    (`reads[i]`: the vars binding i reads)."""
    readers: dict[Var, set[int]] = {}
    for index, read in enumerate(reads):
        for root in found.of_all(read):
            readers.setdefault(root, set()).add(index)
    return readers
