"""ChunkRows: run each large row-separable chain of a lazy function one block of rows at a time,
so that a tensor larger than the memory budget still converts within it.

Applied to the output of the standard pipeline (loads, hand-offs and kills in place). For every
chain (see `chunk_chains`) whose widest value exceeds `block_bytes`:
1. choose the rows of a block: as many as keep each value of a block within `block_bytes`,
   evened out over the blocks, and never more than `max_chunks` blocks;
2. where the chain's last load was (a later phase: after the binding it waits for, see
   `chunk_phases`), emit for each block [r0, r1): its loads
   `R.match_cast(R.call_packed("get_item_rows", i, r0, r1), ...)` (`get_item_cols` when the
   input's columns become the outputs' rows through a transpose), the chain's steps on the
   block (constants that vary along the split cut to the block), and one
   `set_item_rows(j, r0, block)` per output; a value read outside the chain is concatenated
   whole after the phase's blocks, under its own var; the last block's hand-off keeps the var
   of the original `set_item`, so the result is unchanged;
3. drop the chain's original bindings and kill each block value right after its last use.
Relax has no loops, so the blocks are unrolled: the memory estimate, the scheduler and the VM
see every block and the predicted peak is exact. `set_item_rows` writes the rows before it
returns and keeps nothing, so a block is freed by its kill, as the VM and the estimate count.
Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from lazyparams import op
from lazyparams.analysis.memory import estimate_peak_memory
from lazyparams.analysis.memory_model import is_kill
from lazyparams.errors import LazyParamsError, TransformError
from lazyparams.ir import (
    Binding,
    BlockBuilder,
    Call,
    Constant,
    DataflowBlock,
    Expr,
    ExternFunc,
    Function,
    SeqExpr,
    StructInfo,
    TensorStructInfo,
    TupleGetItem,
    Var,
    VarBinding,
    prim_value,
    struct_info_of,
)
from lazyparams.ir.struct_info import tensor
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.chunk_chains import Chain, find_chains
from lazyparams.transform.chunk_phases import Phase
from lazyparams.transform.chunk_reads import SET_ROWS as SET_ROWS  # the row store, also here
from lazyparams.transform.chunk_reads import store_offset
from lazyparams.transform.chunk_splits import Split, const_axis
from lazyparams.transform.kill_plan import insert_kills, plan_kills
from lazyparams.transform.util import HANDOFF, packed_call

GET_ROWS = "get_item_rows"
"""`get_item_rows(i, start, stop)`: rows [start, stop) of input i."""
GET_COLS = "get_item_cols"
"""`get_item_cols(i, start, stop)`: columns [start, stop) of the 2-D input i, contiguous."""
MAX_CHUNKS = 256
"""Blocks per chain at most: finer blocks would cost more in bindings than they save."""


class ChunkRows(NamedFunctionPass):
    """Unroll every row-separable chain wider than `block_bytes` into blocks (module steps).

    `inputs` gives the struct info of every input, for loads typed `R.Object`; `only_inputs`
    limits the pass to the chains loading those input indices. `fget_item` / `fset_item` name
    the whole-tensor load and hand-off the chains start and end with; `func_names` selects the
    functions (default: names ending in `transform_params`).
    """

    def __init__(
        self,
        block_bytes: int,
        *,
        inputs: Sequence[StructInfo] | None = None,
        fget_item: str = "get_item",
        fset_item: str = "set_item",
        func_names: Sequence[str] | None = None,
        max_chunks: int = MAX_CHUNKS,
        only_inputs: Collection[int] | None = None,
    ) -> None:
        for what, value in (("block_bytes", block_bytes), ("max_chunks", max_chunks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TransformError(
                    f"ChunkRows: expected {what} to be a positive int, got {value!r}"
                )
        if inputs is not None and not all(isinstance(s, StructInfo) for s in inputs):
            raise TransformError(f"ChunkRows: expected inputs to be struct info, got {inputs!r}")
        self.block_bytes, self.max_chunks = block_bytes, max_chunks
        self.inputs = None if inputs is None else tuple(inputs)
        self.fget_item, self.fset_item = fget_item, fset_item
        super().__init__(func_names)
        self.only_inputs = None if only_inputs is None else frozenset(only_inputs)

    def rows(self, chain: Chain) -> int:
        """Rows of each block of `chain` (its length when it is left whole)."""
        rows = max(1, self.block_bytes // max(1, chain.row_bytes))
        count = min(math.ceil(chain.length / rows), self.max_chunks)
        return math.ceil(chain.length / count)

    def chains(self, func: Function) -> list[Chain]:
        """The chains of `func` this pass splits into blocks."""
        found = find_chains(func, self.inputs, self.fget_item, self.fset_item)
        only = self.only_inputs
        wanted = [c for c in found if only is None or any(i in only for i in c.indices)]
        return [c for c in wanted if self.rows(c) < c.length]

    def transform_function(self, name: str, func: Function) -> Function:
        chains = self.chains(func)
        if not chains:
            return func
        handoff = tuple(dict.fromkeys((*HANDOFF, self.fset_item)))
        unrolled, made = _unroll(func, {c.last_load.var: (c, self.rows(c)) for c in chains})
        chunked = insert_kills(unrolled, plan_kills(unrolled, made, handoff), handoff)
        return chunked if self._lowers_peak(func, chunked) else func

    def _lowers_peak(self, func: Function, chunked: Function) -> bool:
        """Whether `chunked` peaks no higher than `func`.

        A whole value stops counting when `set_item` takes it, while a block handed to
        `set_item_rows` counts until its kill; so tiny tensors can peak higher in blocks. A
        pass must never raise the peak, so such functions stay whole. Peaks that cannot be
        estimated (a symbolic dim without a size) are taken to be lowered.
        """
        try:
            before = estimate_peak_memory(func, inputs=self.inputs).peak_bytes
            after = estimate_peak_memory(chunked, inputs=self.inputs).peak_bytes
        except LazyParamsError:
            return True
        return after <= before


def _unroll(func: Function, chains: dict[Var, tuple[Chain, int]]) -> tuple[Function, list[Var]]:
    """`func` with each chain's bindings replaced by its blocks, phase by phase, each phase
    right after its anchor (steps 2 and 3 but the kills), and the vars of the blocks' values
    and of the values gathered whole."""
    dropped = {b for chain, _ in chains.values() for b in chain.members}
    free = {var for chain, _ in chains.values() for var in chain.free}
    dropped |= {b for b in func.bindings() if is_kill(b.value) and set(_killed(b)) & free}
    anchored: dict[Binding, list[tuple[Chain, Phase, int]]] = {}
    for chain, rows in chains.values():
        for phase in chain.phases:
            anchored.setdefault(phase.anchor, []).append((chain, phase, rows))
    bb = BlockBuilder()
    for var in (*func.params, *(b.var for b in func.bindings())):
        bb.names.reserve(var.name_hint)
    made: list[Var] = list(free)  # their kills are planned again, after the last block
    for block in func.body.blocks:
        bb.begin_block(isinstance(block, DataflowBlock))
        for binding in block.bindings:
            if binding not in dropped:
                bb.emit_binding(binding)
            for chain, phase, rows in anchored.get(binding, ()):
                made += _emit_phase(bb, chain, phase, rows)
    bb.end_block()
    body = SeqExpr(bb.take_blocks(), func.body.body)
    return Function(func.params, body, func.ret_struct_info, False, func.attrs), made


def _killed(binding: Binding) -> list[Var]:
    """The vars a kill binding frees."""
    value = binding.value
    assert isinstance(value, Call)
    return [a for a in value.args if isinstance(a, Var)]


def _emit_phase(bb: BlockBuilder, chain: Chain, phase: Phase, rows: int) -> list[Var]:
    """Emit one pass of `chain` over its blocks, then gather the values read outside it."""
    made: list[Var] = []
    pieces: dict[Var, list[Var]] = {var: [] for var in phase.gathered}
    for start in range(0, chain.length, rows):
        remap = _emit_block(bb, chain, phase, start, min(chain.length, start + rows))
        made += remap.values()
        for var, blocks in pieces.items():
            blocks.append(remap[var])
    for var, blocks in pieces.items():
        split = chain.splits[var]
        assert isinstance(split, int)
        bb.emit_binding(VarBinding(var, op.concat(blocks, axis=split)))
        made.append(var)
    return made


def _emit_block(
    bb: BlockBuilder, chain: Chain, phase: Phase, start: int, stop: int
) -> dict[Var, Var]:
    """Emit the phase on rows [start, stop); returns each chain value's block var."""
    extern = GET_ROWS if chain.axis == 0 else GET_COLS
    remap: dict[Var, Var] = {}
    members = set(phase.members)
    for load, index, whole in chain.loads or ((chain.load, chain.index, chain.sinfo),):
        if load not in members:
            continue
        bounds = [prim_value(index), prim_value(start), prim_value(stop)]
        sinfo = block_sinfo(whole, chain.axis, stop - start)
        call = packed_call(ExternFunc(extern), bounds)
        remap[load.var] = bb.match_cast(call, sinfo, load.var.name_hint)
    loads = set(remap)
    for binding in phase.members:
        value = binding.value
        if binding.var in loads or is_kill(value):
            continue
        if binding.var in chain.splits:
            block_value = _block_value(value, remap, chain, binding.var, (start, stop))
            remap[binding.var] = bb.emit(block_value, binding.var.name_hint)
            continue
        assert isinstance(value, Call) and isinstance(value.args[-1], Var)
        first = store_offset(value)
        assert first is not None
        store = packed_call(
            ExternFunc(SET_ROWS),
            [value.args[0], prim_value(first + start), remap[value.args[-1]]],
        )
        if stop == chain.length:  # the last block's receipt stands for the whole output
            bb.emit_binding(VarBinding(binding.var, store))
        else:
            bb.emit(store, "lv")
    return remap


def block_sinfo(sinfo: TensorStructInfo, axis: int, rows: int) -> TensorStructInfo:
    """`sinfo` with `rows` indices along `axis`."""
    shape = sinfo.static_shape
    assert shape is not None
    return tensor((*shape[:axis], rows, *shape[axis + 1 :]), sinfo.dtype)


def _block_value(
    value: Expr, remap: dict[Var, Var], chain: Chain, var: Var, bounds: tuple[int, int]
) -> Expr:
    """A step of the chain on one block: operands are the block's values."""
    if isinstance(value, Var):
        return remap[value]
    if isinstance(value, TupleGetItem):
        assert isinstance(value.tuple_value, Var)
        return TupleGetItem(remap[value.tuple_value], value.index)
    assert isinstance(value, Call)
    split, out = chain.splits[var], struct_info_of(var)
    args = tuple(
        remap.get(a, a) if isinstance(a, Var) else block_const(a, out, split, chain.length, bounds)
        for a in value.args
    )
    return Call(value.op, args, value.attrs, value.sinfo_args)


def block_const(
    arg: Expr, out: StructInfo, split: Split, length: int, bounds: tuple[int, int]
) -> Expr:
    """A constant operand of an element-wise step, cut to the block where it varies along the
    split (one entry per row, say) and kept whole where it broadcasts along it."""
    if not isinstance(arg, Constant) or not isinstance(split, int):
        return arg
    assert isinstance(out, TensorStructInfo)
    axis = const_axis(arg, out.ndim, split, length)
    if axis < 0:
        return arg
    import numpy as np  # loaded already: the constant holds an array

    cut = (slice(None),) * axis + (slice(*bounds),)
    return Constant(np.ascontiguousarray(arg.data[cut]))
