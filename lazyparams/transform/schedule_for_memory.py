"""ScheduleForMemory: reorder a transform function's bindings for the lowest lazy peak.

Works on the eager function, before the lazy rewrite, in steps: 1. merge repeated `params[i]`
reads; 2. find what each binding must follow (data, symbolic dims, impure order); 3. order
each block (exactly when small, greedily when large; never worse than as written) for the peak
its lazy form will have; 4. emit it with each load right before its first use. Imports `ir`,
`analysis` and the pass base.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lazyparams.analysis.memory_builder import buffer_model
from lazyparams.analysis.memory_model import BufferModel
from lazyparams.analysis.memory_order import exact_order, greedy_order, peak_of, segment_graph
from lazyparams.errors import TransformError
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    DataflowVar,
    ExprMutator,
    Function,
    If,
    MatchCast,
    SeqExpr,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    is_pure_call,
)
from lazyparams.ir.prim import PrimVar
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.lift_plan import with_resets, without_resets
from lazyparams.transform.util import prim_vars

EXACT_LIMIT = 12
"""Segments of at most this many nodes get a lowest-peak order (2^n * n work); larger ones a
greedy order."""

DEFAULT_DIM = 1024
"""Stand-in for a symbolic dim with no given size: ordering only needs relative sizes."""


class ScheduleForMemory(NamedFunctionPass):
    """Reorder transform functions so that their lazy form peaks as low as the data flow allows.

    Like `LazyTransformParams`, it rewrites every function whose name ends with
    `transform_params`, or the functions named in `func_names`. `sizes` gives symbolic dims
    values for weighing (others count as `DEFAULT_DIM`).
    """

    def __init__(
        self, sizes: Mapping[str, int] | None = None, func_names: Sequence[str] | None = None
    ) -> None:
        super().__init__(func_names)
        self.sizes = dict(sizes or {})

    def transform_function(self, name: str, func: Function) -> Function:
        return schedule_function(func, self.sizes)


def schedule_function(func: Function, sizes: Mapping[str, int] | None = None) -> Function:
    """`func` with repeated loads merged and every block reordered for the lowest lazy peak;
    a `tuple_reset_item` (LiftTransformParams' consume_params) follows its slot's read again."""
    stripped, reset = without_resets(func)
    scheduled = _schedule(stripped, sizes)
    if not reset:
        return scheduled
    return func if scheduled is stripped else with_resets(scheduled, reset)


def _schedule(func: Function, sizes: Mapping[str, int] | None) -> Function:
    func = merge_repeated_loads(func)
    model = _lazy_model(func, sizes or {})
    deps = _dependencies(model, func)
    blocks, start, changed = [], 0, False
    for block in func.body.blocks:
        stop = start + len(block.bindings)
        order = [i for lo, hi in _segments(model, start, stop) for i in _order(model, lo, hi, deps)]
        changed = changed or order != list(range(start, stop))
        blocks.append(type(block)(tuple(model.bindings[i] for i in order)))
        start = stop
    if not changed:
        return func
    body = SeqExpr(tuple(blocks), func.body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _lazy_model(func: Function, sizes: Mapping[str, int]) -> BufferModel:
    """The lazy memory model of `func`, or the eager one when its weights cannot be lazy."""
    try:
        return buffer_model(func, sizes, as_lazy=True, default_dim=DEFAULT_DIM, allow_if=True)
    except TransformError:
        return buffer_model(func, sizes, default_dim=DEFAULT_DIM, allow_if=True)


def _segments(model: BufferModel, start: int, stop: int) -> list[tuple[int, int]]:
    """Split a block around bindings of nested functions, whose captured vars we cannot see,
    and around If bindings, which stay where they are (each branch is left as written)."""
    segments, lo = [], start
    for index in range(start, stop):
        if isinstance(model.bindings[index].value, Function | If):
            segments += [(lo, index), (index, index + 1)]
            lo = index + 1
    segments.append((lo, stop))
    return [(a, b) for a, b in segments if a < b]


def _order(model: BufferModel, lo: int, hi: int, deps: dict[int, set[int]]) -> list[int]:
    """Binding indices of `lo..hi-1` in their new order, loads right before their first use."""
    graph = segment_graph(model, lo, hi, deps)
    original = list(range(len(graph.nodes)))
    exact = len(graph.nodes) <= EXACT_LIMIT
    found = exact_order(graph) if exact else greedy_order(graph)
    # The original order (loads sunk) wins ties, so the peak never rises and the pass is stable.
    best = min([original, found], key=lambda order: peak_of(graph, order))
    return graph.emit(best)


# Step 1. Merge repeated reads of one input ---------------------------------------------------


def merge_repeated_loads(func: Function) -> Function:
    """Bind each `params[i]` once where its var is visible; later reads use that var."""
    num_input = int(func.attrs.get("num_input", 0))
    weights = {p for p in func.params[num_input:] if isinstance(p.struct_info, TupleStructInfo)}
    visible: dict[tuple[Var, int], Var] = {}
    remap: dict[Var, Var] = {}
    merged = [(block, _merge_block(block, weights, visible, remap)) for block in func.body.blocks]
    if not remap:
        return func
    mutator = ExprMutator()
    mutator.var_remap.update(remap)
    blocks = tuple(
        type(block)(tuple(_remap_binding(b, mutator) for b in bindings))
        for block, bindings in merged
    )
    body = SeqExpr(blocks, mutator.visit_expr(func.body.body))
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _load_key(binding: Binding, weights: set[Var]) -> tuple[Var, int] | None:
    value = binding.value
    if not (isinstance(binding, VarBinding) and isinstance(value, TupleGetItem)):
        return None
    base = value.tuple_value
    return (base, value.index) if isinstance(base, Var) and base in weights else None


def _merge_block(
    block: BindingBlock,
    weights: set[Var],
    visible: dict[tuple[Var, int], Var],
    remap: dict[Var, Var],
) -> list[Binding]:
    """The block's bindings with repeated loads dropped (and recorded in `remap`)."""
    groups: dict[tuple[Var, int], list[Binding]] = {}
    for binding in block.bindings:
        key = _load_key(binding, weights)
        if key is not None:
            groups.setdefault(key, []).append(binding)
    replace: dict[Binding, Binding | None] = {}
    for key, group in groups.items():
        replace.update((b, None) for b in group)
        if key in visible:
            remap.update((b.var, visible[key]) for b in group)
            continue
        # A var visible after the block must survive the merge, so it is the one kept; it
        # takes the place of the first read.
        keeper = next((b for b in group if not isinstance(b.var, DataflowVar)), group[0])
        replace[group[0]] = keeper if keeper is group[0] else VarBinding(keeper.var, keeper.value)
        remap.update((b.var, keeper.var) for b in group if b is not keeper)
        if not isinstance(keeper.var, DataflowVar):
            visible[key] = keeper.var
    kept = (replace.get(b, b) for b in block.bindings)
    return [b for b in kept if b is not None]


def _remap_binding(binding: Binding, mutator: ExprMutator) -> Binding:
    value = mutator.visit_expr(binding.value)
    if value is binding.value:
        return binding
    if isinstance(binding, MatchCast):
        return MatchCast(binding.var, value, binding.struct_info)
    return VarBinding(binding.var, value)


# Step 2. What each binding must follow -------------------------------------------------------


def _dependencies(model: BufferModel, func: Function) -> dict[int, set[int]]:
    """For each binding, the earlier bindings it must follow in any order.

    Its data inputs, the match_cast that binds a symbolic dim it mentions, and, for an impure
    call, the previous impure call.
    """
    defined_at = {b.var: i for i, b in enumerate(model.bindings)}
    dim_defs = _dim_definitions(model, func)
    deps: dict[int, set[int]] = {}
    last_impure = -1
    for index, binding in enumerate(model.bindings):
        found = {defined_at[v] for v in model.readers[index] if v in defined_at}
        if dim_defs:
            found |= {dim_defs[v] for v in _dims_used(binding) if v in dim_defs}
        if isinstance(binding.value, Call) and not is_pure_call(binding.value):
            found |= {last_impure} if last_impure >= 0 else set()
            last_impure = index
        found.discard(index)
        deps[index] = found
    return deps


def _dim_definitions(model: BufferModel, func: Function) -> dict[PrimVar, int]:
    """The binding index of the match_cast that first binds each symbolic dim."""
    known = set(prim_vars([p.struct_info for p in func.params]))
    found: dict[PrimVar, int] = {}
    for index, binding in enumerate(model.bindings):
        if isinstance(binding, MatchCast):
            for var in prim_vars(binding.struct_info):
                if var not in known:
                    found.setdefault(var, index)
    return found


def _dims_used(binding: Binding) -> list[PrimVar]:
    used = prim_vars(binding.value) + prim_vars(binding.var.struct_info)
    if isinstance(binding, MatchCast):
        used += prim_vars(binding.struct_info)
    return used
