"""The phases of a chain: passes over its blocks, each run where the values it needs exist.

A reduction over a chain (slerp's dot product, a norm) is written rows first: a row-wise step
gives one value per row, a small vector read outside the chain (its total), and the total then
scales the chain's rows. Run in blocks, that is two passes: the first computes each block's
row values, which are *gathered* (concatenated, whole) after its last block; the total is then
computed as before; the second pass loads the blocks again and runs the steps that need the
total. A value leaving the chain (handed off, or gathered) is made in the phase that runs
after the latest of its loads and of the outside values it needs (a norm of its own, say);
every phase recomputes what it needs of the chain from its loads, so no block outlives its
pass. Imports `ir` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lazyparams.analysis.memory_model import is_kill
from lazyparams.ir import Binding, Var

Position = Mapping[Var, int]


@dataclass(frozen=True, slots=True)
class Phase:
    """One pass over the blocks: it runs right after `anchor` (a binding of the original
    function), computing `members` (loads, steps and hand-offs, in body order) on each block,
    then gathering `gathered` (values read outside the chain) whole."""

    anchor: Binding
    members: tuple[Binding, ...]
    gathered: tuple[Var, ...] = ()


def plan_phases(
    members: Sequence[Binding],
    loads: Sequence[Binding],
    position: Position,
    outside: Mapping[Var, Sequence[int]],
    bindings: Sequence[Binding],
    chain_vars: set[Var],
) -> tuple[Phase, ...] | None:
    """The phases of a chain (see the module docstring), or None when a value read outside
    the chain is read before the phase that makes it can run.

    `members` are the chain's bindings in body order (kills and hand-offs included), `loads`
    its loads, `position` each var's binding index, `outside` the indices of the bindings
    outside the chain that read each chain value, `bindings` the function's, `chain_vars`
    every value of the chain. A phase runs for each place where a value leaves the chain (a
    hand-off or a gathered value) can first be made: after the latest of its loads and of the
    outside values it needs.
    """
    ready = _ready(members, loads, position, chain_vars)
    for var, readers in outside.items():
        if min(readers) <= ready[var]:
            return None
    leaving = {var: ready[var] for var in outside}
    for binding in members:
        if binding.var not in chain_vars and not is_kill(binding.value):
            leaving.update((v, ready[v]) for v in _operands(binding) if v in chain_vars)
    if not leaving:  # nothing leaves (dead steps): one pass after the last load, as written
        last = max(position[b.var] for b in loads)
        leaving = dict.fromkeys(chain_vars, last)
    anchors = sorted(set(leaving.values()))
    return tuple(
        _phase(members, set(loads), leaving, outside, bindings[a], a, chain_vars) for a in anchors
    )


def _ready(
    members: Sequence[Binding], loads: Sequence[Binding], position: Position, chain_vars: set[Var]
) -> dict[Var, int]:
    """For each chain value, the index of the latest binding it depends on (outside the
    chain, or a load)."""
    ready = {b.var: position[b.var] for b in loads}
    for binding in members:
        if binding.var in ready or binding.var not in chain_vars:
            continue
        used = _operands(binding)
        ready[binding.var] = max(
            [ready[v] for v in used if v in ready]
            + [position.get(v, -1) for v in used if v not in ready]
        )
    return ready


def _phase(
    members: Sequence[Binding],
    loads: set[Binding],
    leaving: Mapping[Var, int],
    outside: Mapping[Var, Sequence[int]],
    anchor: Binding,
    anchor_at: int,
    chain_vars: set[Var],
) -> Phase:
    """The phase anchored at `anchor_at`: its own steps and hand-offs, and what they need."""
    own = {var for var, when in leaving.items() if when == anchor_at}
    needed = set(own)
    for binding in reversed(members):  # body order: operands come before their readers
        if binding.var in needed:
            needed |= {v for v in _operands(binding) if v in chain_vars}
    chosen = [b for b in members if b.var in needed or _hands_off(b, own, chain_vars)]
    read = {v for b in chosen for v in _operands(b)}
    chosen = [b for b in chosen if b.var in read or b not in loads]  # no unread load
    gathered = tuple(v for v in outside if v in own)
    return Phase(anchor, tuple(chosen), gathered)


def _hands_off(binding: Binding, own: set[Var], chain_vars: set[Var]) -> bool:
    """Whether `binding` is a hand-off (or other reader kept in the chain) of a value made in
    this phase: a binding that is no chain value but reads one of `own`."""
    return binding.var not in chain_vars and any(v in own for v in _operands(binding))


def _operands(binding: Binding) -> list[Var]:
    """The vars `binding`'s value reads, in order."""
    from lazyparams.analysis.liveness import used_vars

    return list(used_vars(binding.value))
