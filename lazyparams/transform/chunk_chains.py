"""Row-separable chains of a lazy function: loaded tensors, the steps that keep their rows
apart, and the outputs they hand off, so the whole chain can run one block of rows at a time.

A chain starts at `x = get_item(i)` and holds every binding reading one of its values, each of
which must be: a step (`astype`; `add`, `subtract`, `multiply`, `divide` of chain values and
constants; `permute_dims`; `layout_cast` of one tensor; `quantize_int8` along the split axis;
`quantize_int4` of rows; `quantize_gguf` / `dequantize_gguf` split along any axis but the
last; a tuple item or copy of a chain value), a hand-off `set_item(j, v)` or a `kill_object`.
Every value has a *split axis*: block k of it comes from block k of the load along the load's
split axis (rows, or the columns of a 2-D tensor, which a transpose turns into rows). Each
handed-off value must split along its rows. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from lazyparams.analysis.liveness import Liveness, liveness, used_vars
from lazyparams.analysis.memory_model import is_kill
from lazyparams.ir import (
    Binding,
    Call,
    Constant,
    DataflowBlock,
    Function,
    MatchCast,
    Op,
    PrimValue,
    StructInfo,
    TensorStructInfo,
    TupleGetItem,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.ir.dtype import is_block
from lazyparams.ir.prim import IntImm
from lazyparams.transform.chunk_phases import Phase, plan_phases
from lazyparams.transform.chunk_reads import (
    SET_ROWS,
    calls,
    cuts_rows,
    is_op,
    reduces_rows,
    row_axis,
    same_rows,
    store_index,
    store_offset,
)
from lazyparams.transform.chunk_splits import (
    BLOCK_STEPS,
    ELEMENTWISE,
    GATHERS,
    REDUCTIONS,
    SLICES,
    UNARY,
    UNPACKS,
    Split,
    fits,
    row_bytes_of,
    shape_of,
    step_split,
)

JOINS = ELEMENTWISE | {"matmul"} | GATHERS
"""The steps whose other operands may be loads joining the chain, or free operands (the
whole right operand of a matmul whose rows come from the chain, a gather's indices)."""
STEP_OPS = ELEMENTWISE | UNARY | REDUCTIONS | BLOCK_STEPS | JOINS | UNPACKS | SLICES
STEP_OPS |= {"permute_dims", "quantize_int8", "quantize_int4"}
STEP_OPS |= {"layout_cast"}  # of one tensor (no join): a permutation and a cast


@dataclass(frozen=True, slots=True)
class Chain:
    """A loaded tensor and the bindings that can run block by block along its split axis.

    `members` are the load, the steps, the hand-offs and the kills, in body order; `splits`
    gives the split axis of every value of the chain; `length` is the extent of that axis
    (the rows of every output); `row_bytes` the bytes one index of it takes in the chain's
    widest value, so a block of `r` rows holds at most `r * row_bytes` bytes per value.
    """

    load: Binding
    index: int
    sinfo: TensorStructInfo
    axis: int
    length: int
    members: tuple[Binding, ...]
    splits: dict[Var, Split]
    row_bytes: int
    loads: tuple[tuple[Binding, int, TensorStructInfo], ...] = ()
    """Every load of the chain, `(binding, input index, struct info)`, in body order (the
    first is `load`); the chain runs where the last of them was."""
    phases: tuple[Phase, ...] = ()
    """The passes over the blocks (see `chunk_phases`): one, unless a value of the chain is
    gathered for a reduction whose result later steps need."""
    free: tuple[Var, ...] = ()
    """The operands the chain's steps take whole (a scalar, a matmul's right operand): they
    must live until the last block that reads them, wherever their kills were."""

    @property
    def indices(self) -> tuple[int, ...]:
        """The input indices the chain loads."""
        return tuple(index for _, index, _ in self.loads) or (self.index,)

    @property
    def last_load(self) -> Binding:
        """The load after which every block of the chain runs."""
        return self.loads[-1][0] if self.loads else self.load

    @property
    def nbytes(self) -> int:
        """Bytes of the chain's widest value."""
        return self.row_bytes * self.length


def find_chains(
    func: Function,
    inputs: Sequence[StructInfo] | None = None,
    fget_item: str = "get_item",
    fset_item: str = "set_item",
) -> list[Chain]:
    """Every chain of `func`, in the order of their loads.

    A load typed `R.Object` is sized from `inputs` (the struct info of every input), if given.
    Chains whose values are read outside the chain, live in a dataflow block, or have dims that
    are not constants are left out.
    """
    live = liveness(func)
    finder = _Finder(func, live, inputs, fget_item, fset_item)
    return [c for c in map(finder.chain, range(len(live.bindings))) if c is not None]


class _Finder:
    """Grows a chain from each load and finds the split axes that make it run in blocks."""

    def __init__(
        self,
        func: Function,
        live: Liveness,
        inputs: Sequence[StructInfo] | None,
        fget_item: str,
        fset_item: str,
    ) -> None:
        self.live, self.inputs = live, inputs
        self.fget_item, self.fset_item = fget_item, fset_item
        self.readers: dict[Var, list[int]] = {}
        for index, used in enumerate(live.uses):
            for var in used:
                self.readers.setdefault(var, []).append(index)
        self.position = {b.var: i for i, b in enumerate(live.bindings)}
        self.dataflow: set[int] = set()
        position = 0
        for block in func.body.blocks:
            if isinstance(block, DataflowBlock):
                self.dataflow.update(range(position, position + len(block.bindings)))
            position += len(block.bindings)

    def chain(self, position: int) -> Chain | None:
        """The chain whose first load is at `position`, else None."""
        binding = self.live.bindings[position]
        found = self._load(binding)
        if found is None or position in self.dataflow:
            return None
        grown = self._members(position)
        if grown is None or min(grown[1]) != position:
            return None  # a chain joining several loads is found from its first
        members, load_positions, outside, free = grown
        loads = []
        for at in sorted(load_positions):
            index, sinfo = self._load(self.live.bindings[at]) or (0, None)
            assert sinfo is not None
            loads.append((self.live.bindings[at], index, sinfo))
        bindings = tuple(self.live.bindings[i] for i in sorted(members))
        ndims = {sinfo.ndim for _, _, sinfo in loads}
        for axis in (0, 1) if ndims == {2} else (0,):
            chain = _split(tuple(loads), axis, bindings, self.fset_item)
            if chain is not None:
                return self._phased(replace(chain, free=tuple(free)), outside)
        return None

    def _phased(self, chain: Chain, outside: dict[Var, list[int]]) -> Chain | None:
        """`chain` with its phases, or None when a value read outside it cannot be gathered
        (not split, or no smaller than the chain's widest value) or is read too early."""
        for var in outside:
            split = chain.splits.get(var)
            if not isinstance(split, int):
                return None
            if row_bytes_of(struct_info_of(var), chain.length) >= chain.row_bytes:
                return None  # gathering it whole would hold as much as no blocks at all
        loads = [binding for binding, _, _ in chain.loads]
        phases = plan_phases(
            chain.members, loads, self.position, outside, self.live.bindings, set(chain.splits)
        )
        return None if phases is None else replace(chain, phases=phases)

    def _load(self, binding: Binding) -> tuple[int, TensorStructInfo] | None:
        """(input index, static struct info) when `binding` is a plain `get_item(i)`."""
        call = binding.value
        if not isinstance(call, Call) or not calls(call, self.fget_item) or len(call.args) != 1:
            return None
        arg = call.args[0]
        if not isinstance(arg, PrimValue) or not isinstance(arg.value, IntImm):
            return None
        index = arg.value.value
        sinfo: StructInfo | None = binding.struct_info if isinstance(binding, MatchCast) else None
        if sinfo is None and self.inputs is not None and 0 <= index < len(self.inputs):
            sinfo = self.inputs[index]
        if not isinstance(sinfo, TensorStructInfo) or not sinfo.static_shape:
            return None
        return index, sinfo

    def _members(
        self, start: int
    ) -> tuple[set[int], set[int], dict[Var, list[int]], set[Var]] | None:
        """Positions of the bindings of the chain loaded at `start` and of its loads, or None
        when a value of it is read by something that cannot run in blocks.

        Readers are visited in body order, so every chain operand of a binding is known to be
        one by the time the binding is classified; a load another operand comes from joins
        the chain, its readers visited in turn. A binding outside the chain may read a value of
        it (a reduction's row values, to be gathered): the third result lists such readers,
        the fourth the operands the chain's steps take whole.
        """
        members, loads, values = {start}, {start}, {self.live.bindings[start].var}
        free: set[Var] = set()
        outside: dict[Var, list[int]] = {}
        pending = list(self.readers.get(self.live.bindings[start].var, ()))
        heapq.heapify(pending)
        while pending:
            position = heapq.heappop(pending)
            if position in members:
                continue
            binding = self.live.bindings[position]
            before = set(free)
            kind = self._kind(binding, values, free)
            if kind is None or position in self.dataflow:
                return None
            if kind == "outside":
                free -= free - before
                for var in used_vars(binding.value):
                    if var in values:
                        outside.setdefault(var, []).append(position)
                continue
            members.add(position)
            for var in free - before:
                upstream = self._joined(var, binding, values, free, start)
                members.update(upstream)
                loads.update(at for at in upstream if self._joins(self.live.bindings[at].var))
                for at in upstream:
                    self._admit(self.live.bindings[at].var, values, pending)
            if kind == "step":
                self._admit(binding.var, values, pending)
        if values & set(self.live.result_uses):
            return None
        return members, loads, outside, free

    def _joined(
        self, var: Var, binding: Binding, values: Collection[Var], free: set[Var], start: int
    ) -> set[int]:
        """The positions that join the chain with `var`, an operand `binding`'s step takes
        whole so far: its loads and steps, when it is as wide as the step's result and comes
        from loads that split with the chain's first (then `var` leaves `free`), else none (a
        broadcast operand, a matmul's right one, stays whole)."""
        if shape_of(var) != shape_of(binding.var) or is_op(binding, "matmul"):
            return set()
        trial = set(free)
        upstream = self._upstream(var, values, trial)
        if upstream is None or not self._aligned(upstream, start):
            return set()
        free |= trial
        free.discard(var)
        return upstream

    def _admit(self, var: Var, values: set[Var], pending: list[int]) -> None:
        """Make `var` a value of the chain and queue its readers."""
        values.add(var)
        for reader in self.readers.get(var, ()):
            heapq.heappush(pending, reader)

    def _upstream(self, var: Var, values: Collection[Var], free: set[Var]) -> set[int] | None:
        """The positions of the loads and steps `var` is computed from, when it comes from
        loads through steps alone (so it can join the chain), else None; the right operands
        of matmuls on the way stay whole (added to `free`)."""
        at = self.position.get(var)
        if at is None or at in self.dataflow:
            return None
        binding = self.live.bindings[at]
        if self._joins(var):
            return {at}
        value = binding.value
        if isinstance(value, TupleGetItem | Var):
            operands: tuple[object, ...] = (
                (value.tuple_value,) if isinstance(value, TupleGetItem) else (value,)
            )
        elif is_op(binding, "matmul") and isinstance(value, Call):
            operands = value.args[:1]
            free.update(a for a in value.args[1:] if isinstance(a, Var) and a not in values)
        elif isinstance(value, Call) and cuts_rows(value):
            operands = ()  # the gathered table is taken whole and cut per block
            free.update(a for a in value.args[:1] if isinstance(a, Var) and a not in values)
        elif isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in STEP_OPS:
            operands = value.args
        else:
            return None
        found = {at}
        for operand in operands:
            if isinstance(operand, Constant) or operand in values:
                continue
            if not isinstance(operand, Var):
                return None
            if not same_rows(operand, var, row_axis(value)):
                free.add(operand)  # a broadcast operand (a scalar, a norm): taken whole
                continue
            inner = self._upstream(operand, values, free)
            if inner is None:
                return None
            found |= inner
        return found

    def _aligned(self, upstream: set[int], start: int) -> bool:
        """Whether every load among `upstream` could split with the load at `start`: of its
        rank, with its extent along some axis. A load that cannot (GPTQ's packed zero points,
        a whole table a gather cuts per block) stays whole, a free operand, rather than
        making the whole chain unsplittable."""
        first = self._load(self.live.bindings[start])
        assert first is not None
        want = first[1].static_shape or ()
        for at in upstream:
            found = self._load(self.live.bindings[at])
            if found is None:
                continue
            shape = found[1].static_shape or ()
            if len(shape) != len(want) or not any(map(int.__eq__, shape, want)):
                return False
        return True

    def _joins(self, var: Var) -> bool:
        """Whether `var` is a load that may join a chain (a plain `get_item` outside
        dataflow)."""
        at = self.position.get(var)
        if at is None or at in self.dataflow:
            return False
        return self._load(self.live.bindings[at]) is not None

    def _kind(self, binding: Binding, values: Collection[Var], free: set[Var]) -> str | None:
        """What `binding` is to the chain: a step, a store, a kill, or None (it cannot run in
        blocks). A step's operands that are neither chain values nor constants go to `free`."""
        value = binding.value
        if is_kill(value):
            return "kill"
        if isinstance(value, Call) and calls(value, self.fset_item):
            return "store" if store_index(value) is not None else None
        if isinstance(value, Call) and calls(value, SET_ROWS):
            return "store" if store_offset(value) is not None else None
        if not isinstance(binding, VarBinding):
            return None
        if isinstance(value, TupleGetItem | Var):
            return "step"
        if reduces_rows(value):
            return "outside"  # a total over the rows: read outside the chain, once gathered
        if isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in STEP_OPS:
            others = [a for a in value.args if not isinstance(a, Constant) and a not in values]
            if (others and value.op.name not in JOINS) or not all(
                isinstance(a, Var) for a in others
            ):
                return "outside"
            free.update(others)  # type: ignore[arg-type]
            return "step"
        return "outside"


# Split axes --------------------------------------------------------------------------------


def _split(
    loads: tuple[tuple[Binding, int, TensorStructInfo], ...],
    axis: int,
    members: tuple[Binding, ...],
    fset_item: str,
) -> Chain | None:
    """The chain when its loads split along `axis`, or None where some member cannot."""
    load, index, sinfo = loads[0]
    shape = sinfo.static_shape
    assert shape is not None
    splits: dict[Var, Split] = {}
    for binding, _, each in loads:
        dims = each.static_shape
        assert dims is not None
        if dims[axis] != shape[axis] or (is_block(each.dtype) and axis == len(dims) - 1):
            return None  # the columns of block rows share their blocks
        splits[binding.var] = axis
    loaded = {binding for binding, _, _ in loads}
    for binding in members:
        value = binding.value
        if binding in loaded or is_kill(value):
            continue
        if isinstance(value, Call) and (calls(value, fset_item) or calls(value, SET_ROWS)):
            if splits.get(value.args[-1]) != 0:  # type: ignore[call-overload]
                return None
            continue
        split = step_split(value, splits, shape[axis])
        if split is None or not fits(struct_info_of(binding.var), split, shape[axis]):
            return None
        splits[binding.var] = split
    load_vars = {binding.var for binding in loaded}
    sinfos = [*(s for _, _, s in loads), *(struct_info_of(v) for v in splits if v not in load_vars)]
    widest = max(row_bytes_of(s, shape[axis]) for s in sinfos)
    return Chain(load, index, sinfo, axis, shape[axis], members, splits, widest, loads)
