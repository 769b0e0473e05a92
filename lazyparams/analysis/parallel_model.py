"""What a parallel run of a function's bindings must respect: order, exclusivity and bytes.

`parallel_model` gives each binding the bindings it waits for, whether it runs alone, and the
buffers it creates (from the buffer model of the memory analysis); `Ledger` counts the bytes held
as bindings start and complete in any order. Imports `ir` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from lazyparams.analysis.liveness import PARAM, liveness
from lazyparams.analysis.memory_builder import buffer_model
from lazyparams.analysis.memory_model import KILL_OP, BufferModel, is_kill
from lazyparams.ir import (
    Binding,
    Call,
    ExprVisitor,
    ExternFunc,
    Function,
    MatchCast,
    Op,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.op_registry import op_info
from lazyparams.ir.prim import IntImm

REORDERABLE: tuple[str, ...] = ("get_item", "set_item")
"""Externs whose calls may run in any order and at the same time: loads of distinct inputs and
hand-offs of distinct outputs."""


@dataclass(frozen=True, slots=True)
class ParallelModel:
    """The static facts of one function for a parallel run; vars are numbered (`vars[id]`).

    `deps[i]` are the bindings (all before i) that must complete before binding i starts;
    `alone[i]` means i starts only once every earlier binding has completed, and nothing starts
    while it runs. `creates[i]` are the buffers binding i allocates and `created_bytes[i]` their
    bytes; `holders[b]` the vars holding buffer b. `reads[i]` are the vars binding i reads,
    `defines[i]` the var it binds, `readers[v]` how many bindings read var v, `kept` the vars
    the result reads. `timeline[i]` is the bytes held while binding i runs when the bindings run
    one at a time in order; `start_bytes` what the params hold before the first binding.
    """

    vars: tuple[Var, ...]
    names: tuple[str, ...]
    deps: tuple[tuple[int, ...], ...]
    alone: tuple[bool, ...]
    creates: tuple[tuple[int, ...], ...]
    created_bytes: tuple[int, ...]
    sizes: tuple[int, ...]
    holders: tuple[tuple[int, ...], ...]
    reads: tuple[tuple[int, ...], ...]
    defines: tuple[int, ...]
    readers: tuple[int, ...]
    kept: frozenset[int]
    params: tuple[int, ...]
    start_buffers: tuple[int, ...]
    timeline: tuple[int, ...] = ()
    start_bytes: int = 0

    @property
    def peak_bytes(self) -> int:
        """The most bytes held at once when the bindings run one at a time, in order."""
        return max([self.start_bytes, *self.timeline])

    def __len__(self) -> int:
        return len(self.defines)


@dataclass(slots=True)
class Released:
    """What a completed binding lets go: vars to drop (by id) and buffers no var holds any more."""

    vars: list[int] = field(default_factory=list)
    buffers: list[int] = field(default_factory=list)


class Ledger:
    """Bytes held by a run as its bindings start and complete, in any order the deps allow.

    A binding's buffers count from its start; a var is dropped once it is defined and every
    binding reading it has completed (never if the result reads it), and a buffer is released
    once every var holding it is dropped.
    """

    def __init__(self, model: ParallelModel) -> None:
        self.model = model
        self.held = sum(model.sizes[b] for b in model.start_buffers)
        self._readers_left = list(model.readers)
        self._holders_left = [len(h) for h in model.holders]
        self._var_buffers: list[list[int]] = [[] for _ in model.vars]
        for buffer, holders in enumerate(model.holders):
            for var in holders:
                self._var_buffers[var].append(buffer)

    def drop_dead_params(self) -> Released:
        """Release the params no binding and not the result reads (call once, before any start)."""
        released = Released()
        for var in self.model.params:
            self._drop_if_done(var, released)
        return released

    def start(self, index: int) -> None:
        """Binding `index` starts: its buffers count from now."""
        self.held += self.model.created_bytes[index]

    def complete(self, index: int) -> Released:
        """Binding `index` completed: its var exists, and what it read may be dropped."""
        model, released = self.model, Released()
        for var in model.reads[index]:
            self._readers_left[var] -= 1
            self._drop_if_done(var, released)
        self._drop_if_done(model.defines[index], released)
        for buffer in model.creates[index]:
            if not model.holders[buffer]:  # nothing keeps it beyond its own step
                self._release(buffer, released)
        return released

    def _drop_if_done(self, var: int, released: Released) -> None:
        """Drop `var` if no binding still has to read it. Called when it becomes defined and
        when each of its readers completes, so it is dropped exactly once."""
        if self._readers_left[var] or var in self.model.kept:
            return
        released.vars.append(var)
        for buffer in self._var_buffers[var]:
            self._holders_left[buffer] -= 1
            if self._holders_left[buffer] == 0:
                self._release(buffer, released)

    def _release(self, buffer: int, released: Released) -> None:
        self.held -= self.model.sizes[buffer]
        released.buffers.append(buffer)


# Building the model ----------------------------------------------------------------------------


def parallel_model(
    func: Function,
    sizes: Mapping[str, int] | None = None,
    *,
    inputs: Sequence[StructInfo] | None = None,
    reorderable: Collection[str] = REORDERABLE,
) -> ParallelModel:
    """The parallel-run facts of `func`; `sizes` and `inputs` as for `estimate_peak_memory`.

    Calls of the externs in `reorderable` may run in any order and at once; any other extern
    call, impure op, call of a function or callback, and `match_cast` to a symbolic shape (it
    binds the dims later bindings read) runs alone, in program order.
    """
    live = liveness(func)
    buffers = buffer_model(func, sizes, inputs=inputs)
    ids = _number_vars(func, live.bindings, live.uses)
    creates = _creates(buffers)
    reads = tuple(tuple(ids[v] for v in used) for used in live.uses)
    readers = [0] * len(ids)
    for used in reads:
        for var in used:
            readers[var] += 1
    alone = tuple(_runs_alone(b, frozenset(reorderable)) for b in live.bindings)
    model = ParallelModel(
        vars=tuple(ids),
        names=tuple(b.var.name_hint for b in live.bindings),
        deps=_dependencies(live.bindings, reads, [ids[b.var] for b in live.bindings], alone),
        alone=alone,
        creates=creates,
        created_bytes=tuple(sum(buffers.sizes[b] for b in c) for c in creates),
        sizes=tuple(buffers.sizes),
        holders=_holders(buffers, ids),
        reads=reads,
        defines=tuple(ids[b.var] for b in live.bindings),
        readers=tuple(readers),
        kept=frozenset(ids[v] for v in live.result_uses),
        params=tuple(ids[p] for p in func.params),
        start_buffers=tuple(b for b, c in enumerate(buffers.created_by) if c == PARAM),
    )
    return _with_timeline(model)


def _number_vars(
    func: Function, bindings: Sequence[Binding], uses: Sequence[Sequence[Var]]
) -> dict[Var, int]:
    """An id for every var: params, then binding vars, then anything else read."""
    ids: dict[Var, int] = {}
    for var in [*func.params, *(b.var for b in bindings), *(v for u in uses for v in u)]:
        ids.setdefault(var, len(ids))
    return ids


def _creates(buffers: BufferModel) -> tuple[tuple[int, ...], ...]:
    """The buffers each binding creates (params' buffers exist before any)."""
    creates: list[list[int]] = [[] for _ in buffers.bindings]
    for buffer, creator in enumerate(buffers.created_by):
        if creator != PARAM:
            creates[creator].append(buffer)
    return tuple(tuple(c) for c in creates)


def _holders(buffers: BufferModel, ids: Mapping[Var, int]) -> tuple[tuple[int, ...], ...]:
    return tuple(
        tuple(ids[v] for v in buffers.holders.get(b, ()) if v in ids)
        for b in range(len(buffers.sizes))
    )


def _dependencies(
    bindings: Sequence[Binding],
    reads: Sequence[tuple[int, ...]],
    defines: Sequence[int],
    alone: Sequence[bool],
) -> tuple[tuple[int, ...], ...]:
    """For each binding, the earlier bindings it waits for.

    A binding waits for the definitions it reads and for the binding after which nothing may
    run before it (the last one that runs alone). A kill waits for every earlier reader of its
    var; a (malformed) read after a kill waits for the kill, to fail as it would in order.
    """
    defined_at = {var: i for i, var in enumerate(defines)}
    readers: dict[int, list[int]] = {}
    killed_at: dict[int, int] = {}
    last_alone = -1
    deps = []
    for index, binding in enumerate(bindings):
        wait = {defined_at[v] for v in reads[index] if v in defined_at}
        wait |= {killed_at[v] for v in reads[index] if v in killed_at}
        if is_kill(binding.value) and reads[index]:
            target = reads[index][0]
            wait.update(readers.get(target, ()))
            killed_at[target] = index
        if last_alone >= 0:
            wait.add(last_alone)
        if alone[index]:
            last_alone = index
        for var in reads[index]:
            readers.setdefault(var, []).append(index)
        deps.append(tuple(sorted(w for w in wait if w < index)))
    return tuple(deps)


class _CallFinder(ExprVisitor):
    """Collects every call inside an expression (nested functions are not entered)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def visit_call_(self, call: Call) -> None:
        self.calls.append(call)
        super().visit_call_(call)


def _runs_alone(binding: Binding, reorderable: frozenset[str]) -> bool:
    """Whether the binding has effects (or binds dims) that fix its place in the order."""
    if isinstance(binding, MatchCast) and not _is_static(binding.struct_info):
        return True
    finder = _CallFinder()
    finder.visit_expr(binding.value)
    return any(not _reorderable_call(call, reorderable) for call in finder.calls)


def _reorderable_call(call: Call, reorderable: frozenset[str]) -> bool:
    if isinstance(call.op, Op):
        return call.op.name == KILL_OP or op_info(call.op).pure
    return isinstance(call.op, ExternFunc) and call.op.global_symbol in reorderable


def _is_static(sinfo: StructInfo) -> bool:
    """Whether a struct info mentions no symbolic dim (so matching it binds none)."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.shape is None or sinfo.static_shape is not None
    if isinstance(sinfo, TupleStructInfo):
        return all(_is_static(f) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values is None or all(isinstance(v, IntImm) for v in sinfo.values)
    if isinstance(sinfo, PrimStructInfo):
        return sinfo.value is None or isinstance(sinfo.value, IntImm)
    return True


def _with_timeline(model: ParallelModel) -> ParallelModel:
    """`model` with the bytes its ledger holds during each binding, run one at a time in order."""
    ledger = Ledger(model)
    ledger.drop_dead_params()
    start, timeline = ledger.held, []
    for index in range(len(model)):
        ledger.start(index)
        timeline.append(ledger.held)
        ledger.complete(index)
    return replace(model, timeline=tuple(timeline), start_bytes=start)
