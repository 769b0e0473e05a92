"""Row-separable chains of a lazy function: one loaded tensor, the steps that keep its rows
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
from dataclasses import dataclass

from lazyparams.analysis.liveness import Liveness, liveness
from lazyparams.analysis.memory_model import is_kill, tensor_nbytes
from lazyparams.ir import (
    Binding,
    Call,
    Constant,
    DataflowBlock,
    ExternFunc,
    Function,
    MatchCast,
    Op,
    PrimValue,
    StructInfo,
    TensorStructInfo,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.ir.dtype import is_block
from lazyparams.ir.prim import IntImm

Split = int | tuple["Split", ...]
"""The split axis of a value: an axis for a tensor, one split per field for a tuple."""

ELEMENTWISE = frozenset({"add", "subtract", "multiply", "divide"})
BLOCK_STEPS = frozenset({"quantize_gguf", "dequantize_gguf"})
"""GGML block (de)quantization: rows are independent, but a row's values share blocks."""
STEP_OPS = ELEMENTWISE | BLOCK_STEPS | {"astype", "permute_dims", "quantize_int8", "quantize_int4"}
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
        self.dataflow: set[int] = set()
        position = 0
        for block in func.body.blocks:
            if isinstance(block, DataflowBlock):
                self.dataflow.update(range(position, position + len(block.bindings)))
            position += len(block.bindings)

    def chain(self, position: int) -> Chain | None:
        binding = self.live.bindings[position]
        found = self._load(binding)
        if found is None or position in self.dataflow:
            return None
        index, sinfo = found
        members = self._members(position)
        if members is None:
            return None
        bindings = tuple(self.live.bindings[i] for i in sorted(members))
        for axis in (0, 1) if sinfo.ndim == 2 else (0,):
            chain = _split(binding, index, sinfo, axis, bindings, self.fset_item)
            if chain is not None:
                return chain
        return None

    def _load(self, binding: Binding) -> tuple[int, TensorStructInfo] | None:
        """(input index, static struct info) when `binding` is a plain `get_item(i)`."""
        call = binding.value
        if not isinstance(call, Call) or not _calls(call, self.fget_item) or len(call.args) != 1:
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

    def _members(self, start: int) -> set[int] | None:
        """Positions of the bindings of the chain loaded at `start`, or None when a value of
        it is read by something that cannot run in blocks.

        Readers are visited in body order, so every chain operand of a binding is known to be
        one by the time the binding is classified.
        """
        load = self.live.bindings[start].var
        members, values = {start}, {load}
        pending = list(self.readers.get(load, ()))
        heapq.heapify(pending)
        while pending:
            position = heapq.heappop(pending)
            if position in members:
                continue
            binding = self.live.bindings[position]
            kind = self._kind(binding, values)
            if kind is None or position in self.dataflow:
                return None
            members.add(position)
            if kind == "step":
                values.add(binding.var)
                for reader in self.readers.get(binding.var, ()):
                    heapq.heappush(pending, reader)
        if values & set(self.live.result_uses):
            return None
        return members

    def _kind(self, binding: Binding, values: Collection[Var]) -> str | None:
        value = binding.value
        if is_kill(value):
            return "kill"
        if isinstance(value, Call) and _calls(value, self.fset_item):
            return "store" if _store_index(value) is not None else None
        if not isinstance(binding, VarBinding):
            return None
        if isinstance(value, TupleGetItem | Var):
            return "step"
        if isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in STEP_OPS:
            closed = all(isinstance(a, Constant) or a in values for a in value.args)
            return "step" if closed else None
        return None


def _calls(call: Call, name: str) -> bool:
    return isinstance(call.op, ExternFunc) and call.op.global_symbol == name


def _store_index(call: Call) -> int | None:
    """The output index of a `set_item(j, value)` hand-off of a var, else None."""
    if len(call.args) != 2 or not isinstance(call.args[1], Var):
        return None
    index = call.args[0]
    if isinstance(index, PrimValue) and isinstance(index.value, IntImm):
        return index.value.value
    return None


# Split axes --------------------------------------------------------------------------------


def _split(
    load: Binding,
    index: int,
    sinfo: TensorStructInfo,
    axis: int,
    members: tuple[Binding, ...],
    fset_item: str,
) -> Chain | None:
    """The chain when the load splits along `axis`, or None where some member cannot."""
    shape = sinfo.static_shape
    assert shape is not None
    if is_block(sinfo.dtype) and axis == len(shape) - 1:
        return None  # the columns of block rows share their blocks
    splits: dict[Var, Split] = {load.var: axis}
    for binding in members[1:]:
        value = binding.value
        if is_kill(value):
            continue
        if isinstance(value, Call) and _calls(value, fset_item):
            if splits.get(value.args[1]) != 0:  # type: ignore[call-overload]
                return None
            continue
        split = step_split(value, splits, shape[axis])
        if split is None or not _fits(struct_info_of(binding.var), split, shape[axis]):
            return None
        splits[binding.var] = split
    sinfos = [sinfo, *(struct_info_of(v) for v in splits if v is not load.var)]
    widest = max(_row_bytes(s, shape[axis]) for s in sinfos)
    return Chain(load, index, sinfo, axis, shape[axis], members, splits, widest)


def step_split(value: object, splits: dict[Var, Split], length: int) -> Split | None:
    """The split axis of a step's result, from those of its operands (None: not separable)."""
    if isinstance(value, Var):
        return splits.get(value)
    if isinstance(value, TupleGetItem):
        parent = splits.get(value.tuple_value)  # type: ignore[call-overload]
        return parent[value.index] if isinstance(parent, tuple) else None
    assert isinstance(value, Call) and isinstance(value.op, Op)
    name, x = value.op.name, value.args[0]
    split = splits.get(x) if isinstance(x, Var) else None
    if name in ELEMENTWISE:
        return elementwise_split(value, splits, length)
    if not isinstance(split, int):
        return None
    if name == "astype":
        return split
    if name in BLOCK_STEPS:
        return split if split != _ndim(x) - 1 else None
    if name in ("permute_dims", "layout_cast"):
        return permutation(value, split)
    if name == "quantize_int8":
        channel = value.attrs.get("axis", 0) % _ndim(x)
        return (split, 0) if channel == split else None
    return (0, 0) if split == 0 else None  # quantize_int4: rows are independent


def permutation(call: Call, split: int) -> int:
    """Where axis `split` of a `permute_dims` operand lands in its result."""
    ndim = _ndim(call.args[0])
    axes = call.attrs.get("axes")
    order = list(reversed(range(ndim))) if axes is None else [a % ndim for a in axes]
    return order.index(split)


def elementwise_split(call: Call, splits: dict[Var, Split], length: int) -> Split | None:
    """The split of a binary op whose chain operands split alike and keep the result's shape,
    and whose constants are constant along the split or give one entry per index of it."""
    out = struct_info_of(call)
    assert isinstance(out, TensorStructInfo)
    chained = [a for a in call.args if isinstance(a, Var)]
    found = {splits.get(a) for a in chained}
    if len(found) != 1 or any(_shape(a) != out.static_shape for a in chained):
        return None
    split = found.pop()
    if not isinstance(split, int):
        return None
    for arg in call.args:
        if isinstance(arg, Constant) and const_axis(arg, out.ndim, split, length) == -2:
            return None
    return split


def const_axis(const: Constant, ndim: int, split: int, length: int) -> int:
    """The axis of `const` to slice with the blocks of a result split along `split`: -1 when
    it broadcasts along the split (nothing to slice), -2 when it cannot be cut in blocks."""
    axis = split - (ndim - const.data.ndim)
    if axis < 0 or const.data.shape[axis] == 1:
        return -1
    return axis if const.data.shape[axis] == length else -2


def _shape(expr: object) -> tuple[int, ...] | None:
    sinfo = struct_info_of(expr)  # type: ignore[arg-type]
    return sinfo.static_shape if isinstance(sinfo, TensorStructInfo) else None


def _ndim(expr: object) -> int:
    sinfo = struct_info_of(expr)  # type: ignore[arg-type]
    assert isinstance(sinfo, TensorStructInfo)
    return sinfo.ndim


def _fits(sinfo: StructInfo, split: Split, length: int) -> bool:
    """Whether a value of `sinfo` has static dims and `length` indices along `split`."""
    if isinstance(sinfo, TupleStructInfo) and isinstance(split, tuple):
        if len(sinfo.fields) != len(split):
            return False
        return all(_fits(f, s, length) for f, s in zip(sinfo.fields, split, strict=True))
    if not isinstance(sinfo, TensorStructInfo) or not isinstance(split, int):
        return False
    shape = sinfo.static_shape
    return shape is not None and 0 <= split < len(shape) and shape[split] == length


def _row_bytes(sinfo: StructInfo, length: int) -> int:
    """Bytes per index of the split axis of the widest tensor in `sinfo`."""
    if isinstance(sinfo, TupleStructInfo):
        return max((_row_bytes(f, length) for f in sinfo.fields), default=0)
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
    return tensor_nbytes(sinfo.dtype, sinfo.static_shape) // length
