"""Where values may be freed: which storage escapes, and the binding after which each var
dies; then the kills themselves, inserted into a function.

A var is killed only after the last use of every var sharing one of its roots (the storage it
holds, from `analysis.aliases`, which the memory model reads too), so nothing is freed while an
alias still reads it.
Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from lazyparams.analysis.aliases import aliases, root_readers
from lazyparams.analysis.liveness import Liveness, liveness, used_vars
from lazyparams.analysis.memory_model import is_kill
from lazyparams.ir import (
    Binding,
    BindingBlock,
    BlockBuilder,
    DataflowBlock,
    Function,
    ObjectStructInfo,
    SeqExpr,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
)
from lazyparams.op import typed_call
from lazyparams.transform.util import is_handoff


@dataclass(frozen=True, slots=True)
class Storage:
    """Alias facts of one function: the roots of every var, the roots that must outlive the
    function's own frame (params, results, values handed off), and the last binding reading
    each root through any of its aliases."""

    roots: dict[Var, frozenset[Var]]
    escaping: frozenset[Var]
    last_read: dict[Var, int]


def storage(func: Function, live: Liveness, handoff: Collection[str]) -> Storage:
    """Alias facts of `func`; values given to a callee named in `handoff` escape."""
    found = aliases(func.params, live.bindings)
    escaping = set(func.params) | found.of_all(live.result_uses)
    last_read = {b.var: index for index, b in enumerate(live.bindings)}
    for root, readers in root_readers(found, live.uses).items():
        last_read[root] = max(last_read.get(root, -1), *readers)
    for binding, used in zip(live.bindings, live.uses, strict=True):
        if is_handoff(binding.value, handoff):
            escaping |= found.of_all(used)
    return Storage(found.roots, frozenset(escaping), last_read)


def holds_memory(sinfo: StructInfo | None) -> bool:
    """Whether a value of this struct info may hold a buffer worth freeing."""
    if isinstance(sinfo, TensorStructInfo | ObjectStructInfo) or sinfo is None:
        return True
    if isinstance(sinfo, TupleStructInfo):
        return any(holds_memory(f) for f in sinfo.fields)
    return False


def plan_kills(
    func: Function, candidates: Iterable[Var], handoff: Collection[str], *, escape: bool = True
) -> dict[int, list[Var]]:
    """Binding index -> the candidate vars to kill right after it.

    A candidate is skipped when it is a param, is already killed, holds no memory, is the
    receipt of a hand-off (a call of a callee named in `handoff`), or shares storage with
    something that escapes: a param, the result, or (with `escape`) a value handed off.
    """
    live = liveness(func)
    facts = storage(func, live, handoff if escape else ())
    killed = {v for b in live.bindings if is_kill(b.value) for v in used_vars(b.value)}
    plan: dict[int, list[Var]] = {}
    for var in candidates:
        if var in killed or not _owned(var, live, facts, handoff):
            continue
        roots = facts.roots[var]
        point = max([live.defined_at[var], *(facts.last_read[r] for r in roots)])
        plan.setdefault(point, []).append(var)
    for vars_ in plan.values():
        vars_.sort(key=lambda v: live.defined_at[v])
    return plan


def _owned(var: Var, live: Liveness, facts: Storage, handoff: Collection[str]) -> bool:
    """Whether the frame alone holds `var`'s storage, so killing it frees something."""
    index = live.defined_at.get(var)
    if index is None or index < 0 or not holds_memory(var.struct_info):
        return False
    if is_handoff(live.bindings[index].value, handoff):
        return False
    return not facts.roots[var] & facts.escaping


def insert_kills(func: Function, plan: dict[int, list[Var]], handoff: Collection[str]) -> Function:
    """`func` with `R.vm.kill_object(v)` after the binding each planned var dies at.

    A kill never separates a binding from the hand-offs of its value that follow it directly,
    so `y = f(x); set_item(0, y)` is followed by the kill of `x`, not split by it.
    """
    if not plan:
        return func
    bb = BlockBuilder()
    for binding in func.bindings():
        bb.names.reserve(binding.var.name_hint)
    for param in func.params:
        bb.names.reserve(param.name_hint)
    index = 0
    for block in func.body.blocks:
        bb.begin_block(isinstance(block, DataflowBlock))
        index = _emit_block(bb, block, index, plan, handoff)
    bb.end_block()
    body = SeqExpr(bb.take_blocks(), func.body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _emit_block(
    bb: BlockBuilder,
    block: BindingBlock,
    start: int,
    plan: dict[int, list[Var]],
    handoff: Collection[str],
) -> int:
    pending: list[Var] = []
    anchor: Var | None = None
    for offset, binding in enumerate(block.bindings):
        hands_off = anchor is not None and _hands_off(binding, anchor, handoff)
        if not hands_off:
            _flush(bb, pending)
            anchor = binding.var
        bb.emit_binding(binding)
        pending.extend(plan.get(start + offset, ()))
    _flush(bb, pending)
    return start + len(block.bindings)


def _hands_off(binding: Binding, anchor: Var, handoff: Collection[str]) -> bool:
    return is_handoff(binding.value, handoff) and anchor in used_vars(binding.value)


def _flush(bb: BlockBuilder, pending: list[Var]) -> None:
    for var in pending:
        call, sinfo = typed_call("vm.kill_object", [var])
        bb.emit(call, "lv", sinfo)
    pending.clear()
