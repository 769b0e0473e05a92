"""What the standard pipeline will do to an eager transform function, for the lazy memory model.

The outputs it hands off, and when `KillAfterLastUse` frees each var: a var it owns is killed
only once every var sharing its storage is done (its *roots*: the var itself, and the storage a
tuple, tuple field or copy of another var reads), a var that shares storage with an output or
a runtime input is left to die at its own last use, and a loaded weight is always killed once
nothing reads its storage. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lazyparams.ir import (
    Binding,
    Call,
    Expr,
    Function,
    GlobalVar,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    struct_info_of,
)


def output_fields(func: Function, output_tuple: int) -> tuple[Expr, ...]:
    """The outputs of `func`: the returned tuple's fields (bound at binding `output_tuple`, or
    inline), the fields of a returned tuple-typed var, or the returned value itself."""
    result = func.body.body
    if isinstance(result, Tuple):
        return result.fields
    if output_tuple >= 0:
        value = func.bindings()[output_tuple].value
        assert isinstance(value, Tuple)
        return value.fields
    sinfo = struct_info_of(result)
    if isinstance(result, Var) and isinstance(sinfo, TupleStructInfo):
        return tuple(TupleGetItem(result, i) for i in range(len(sinfo.fields)))
    return (result,)


@dataclass(frozen=True, slots=True)
class KillFacts:
    """What the kill groups need: the bindings, the reads that keep values alive, the load var
    each weight alias stands for, and the vars handed off or passed in from outside."""

    bindings: tuple[Binding, ...]
    cost_reads: list[tuple[Var, ...]]
    load_of: Mapping[Var, Var]
    escaping: Iterable[Var]
    ignored: int


def kill_group_readers(facts: KillFacts) -> dict[Var, set[int]]:
    """For each var the pipeline kills, every binding its kill waits for."""
    roots = _roots(facts)
    readers_of_root: dict[Var, set[int]] = {}
    for index, reads in enumerate(facts.cost_reads):
        for var in reads:
            for root in roots.get(_canon(facts, var), ()):
                readers_of_root.setdefault(root, set()).add(index)
    escaping: set[Var] = set()
    for var in facts.escaping:
        escaping |= roots.get(_canon(facts, var), frozenset((var,)))
    loads = set(facts.load_of.values())
    groups: dict[Var, set[int]] = {}
    for var, own_roots in roots.items():
        if var in loads or not own_roots & escaping:
            groups[var] = set().union(*(readers_of_root.get(r, set()) for r in own_roots))
    return groups


def _canon(facts: KillFacts, var: Var) -> Var:
    return facts.load_of.get(var, var)


def _roots(facts: KillFacts) -> dict[Var, frozenset[Var]]:
    """The storage roots of every binding var (weight aliases count as their load var)."""
    roots: dict[Var, frozenset[Var]] = {}
    for index, binding in enumerate(facts.bindings):
        var = _canon(facts, binding.var)
        if index == facts.ignored or var is not binding.var:
            continue
        own = frozenset((var,))
        value = binding.value
        if isinstance(value, Call):
            if isinstance(value.op, GlobalVar):  # a Relax function may return its arguments
                own = own.union(*(roots.get(_canon(facts, v), ()) for v in _vars(value.args)))
        elif var not in facts.load_of:
            own = own | _expr_roots(facts, value, roots)
        roots[var] = own
    return roots


def _expr_roots(facts: KillFacts, expr: Expr, roots: dict[Var, frozenset[Var]]) -> frozenset[Var]:
    """The roots an expression reads without copying (a var, tuple fields, a tuple field)."""
    if isinstance(expr, Var):
        return roots.get(_canon(facts, expr), frozenset())
    if isinstance(expr, Tuple):
        return frozenset().union(*(_expr_roots(facts, f, roots) for f in expr.fields))
    if isinstance(expr, TupleGetItem):
        return _expr_roots(facts, expr.tuple_value, roots)
    return frozenset()


def _vars(exprs: Iterable[Expr]) -> list[Var]:
    found: list[Var] = []
    for expr in exprs:
        if isinstance(expr, Var):
            found.append(expr)
        elif isinstance(expr, Tuple):
            found += _vars(expr.fields)
    return found
