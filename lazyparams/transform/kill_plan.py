"""Where values may be freed: which storage each var holds, which storage escapes, and the
binding after which each var dies; then the kills themselves, inserted into a function.

A var holds the storage of its *roots*: itself, and for a tuple, a tuple field, a var copy or
a match_cast of a value, that value's roots too. A var is killed only after the last use of
every var sharing one of its roots, so nothing is freed while an alias still reads it; an If's
var holds what either branch's result may alias.
Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from lazyparams.analysis.liveness import Liveness, liveness, used_vars
from lazyparams.analysis.memory_model import is_kill
from lazyparams.ir import (
    Binding,
    BindingBlock,
    BlockBuilder,
    Call,
    DataflowBlock,
    Expr,
    Function,
    GlobalVar,
    If,
    ObjectStructInfo,
    SeqExpr,
    StructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
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
    aliases = _Aliases(func.params)
    for binding in live.bindings:
        aliases.bind(binding)
    roots = aliases.roots
    escaping: set[Var] = set(func.params)
    for var in live.result_uses:
        escaping |= aliases.of(var)
    last_read: dict[Var, int] = {}
    for index, (binding, used) in enumerate(zip(live.bindings, live.uses, strict=True)):
        last_read.setdefault(binding.var, index)
        for var in used:
            for root in aliases.of(var):
                last_read[root] = max(last_read.get(root, index), index)
        if is_handoff(binding.value, handoff):
            for var in used:
                escaping |= aliases.of(var)
    return Storage(roots, frozenset(escaping), last_read)


class _Aliases:
    """The roots of every var, and of each field of the vars bound to a tuple literal (so
    `t[0]` holds the first field's storage only)."""

    def __init__(self, params: tuple[Var, ...]) -> None:
        self.roots: dict[Var, frozenset[Var]] = {p: frozenset((p,)) for p in params}
        self.fields: dict[Var, tuple[frozenset[Var], ...]] = {}

    def of(self, var: Var) -> frozenset[Var]:
        return self.roots.get(var, frozenset((var,)))

    def bind(self, binding: Binding) -> None:
        """The var itself, plus the storage its value aliases."""
        var, value = binding.var, binding.value
        own = frozenset((var,))
        if isinstance(value, If):
            branches = (value.true_branch, value.false_branch)
            self.roots[var] = own.union(*(self._branch_roots(b) for b in branches))
            return
        if isinstance(value, Call):
            if isinstance(value.op, GlobalVar):  # a Relax function may return its arguments
                own = own.union(*(self.of(v) for v in used_vars(value)))
            self.roots[var] = own
            return
        self.roots[var] = own | self.expr(value)
        if isinstance(value, Tuple):
            self.fields[var] = tuple(self.expr(f) for f in value.fields)
        elif isinstance(value, Var) and value in self.fields:
            self.fields[var] = self.fields[value]

    def _branch_roots(self, branch: SeqExpr) -> frozenset[Var]:
        """The outer roots an If branch's result may alias (its own values become the If's)."""
        inner = _Aliases(())
        inner.roots, inner.fields = dict(self.roots), dict(self.fields)
        local: set[Var] = set()
        for block in branch.blocks:
            for binding in block.bindings:
                inner.bind(binding)
                local.add(binding.var)
        return frozenset(r for r in inner.expr(branch.body) if r not in local)

    def expr(self, expr: Expr) -> frozenset[Var]:
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
