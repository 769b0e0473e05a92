"""What the standard pipeline will do to an eager transform function, for the lazy memory model.

The outputs it hands off, and when `KillAfterLastUse` frees each var: a var it owns is killed
only once every var sharing its storage is done (its roots, from `aliases`, as the kill plan
reads them), a var that shares storage with an output or a runtime input is left to die at its
own last use, and a loaded weight is always killed once nothing reads its storage. Imports
`ir` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lazyparams.analysis.aliases import aliases, root_readers
from lazyparams.ir import (
    Binding,
    Expr,
    Function,
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
    """What the kill groups need: the params, the bindings, the reads that keep values alive,
    the load var each weight read or copy stands for, and the vars handed off."""

    params: tuple[Var, ...]
    bindings: tuple[Binding, ...]
    cost_reads: list[tuple[Var, ...]]
    load_of: Mapping[Var, Var]
    escaping: Iterable[Var]
    ignored: int


def kill_group_readers(facts: KillFacts) -> dict[Var, set[int]]:
    """For each var the pipeline kills, every binding its kill waits for."""
    kept = (b for i, b in enumerate(facts.bindings) if i != facts.ignored)
    found = aliases(facts.params, kept, facts.load_of)
    # the lazy form drops a later read or copy of a loaded weight: it reads nothing
    pairs = zip(facts.bindings, facts.cost_reads, strict=True)
    reads = [() if _is_later_read(facts, b.var) else r for b, r in pairs]
    readers_of_root = root_readers(found, reads)
    escaping = found.of_all((*facts.params, *facts.escaping))
    groups: dict[Var, set[int]] = {}
    for binding in facts.bindings:
        var = binding.var
        own_roots = found.roots.get(var)
        if own_roots is None or _is_later_read(facts, var):
            continue
        if var in facts.load_of or not own_roots & escaping:
            groups[var] = set().union(*(readers_of_root.get(r, set()) for r in own_roots))
    return groups


def _is_later_read(facts: KillFacts, var: Var) -> bool:
    """Whether `var` reads or copies a weight another var loads (the lazy form drops it)."""
    return facts.load_of.get(var, var) is not var
