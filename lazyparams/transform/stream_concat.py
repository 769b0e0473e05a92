"""StreamConcat: hand off each part of a concatenation as soon as the part exists, so that a
tensor stacked from many inputs (a mixture-of-experts layer's experts) never lives whole.

Applied to the output of the standard pipeline. A *stream* is a `c = R.concat(parts, axis=0)`
whose parts are values read by nothing else, followed by steps that keep the rows of `c` apart
(the steps of `chunk_splits`, each splitting along axis 0) and end in hand-offs
`set_item(j, y)` of values split along their rows. The pass runs those steps on each part
right after the part is made and writes the part's rows at their place:
`set_item_rows(j, offset, y_k)`; the last part's hand-off keeps the var of the original
`set_item`. The concatenation and every value the size of the whole are gone, so the peak
holds one part (say one expert) instead of all of them, and the estimate sees it exactly.
A stream whose values are read elsewhere, live in a dataflow block or take an operand made
after its first part is left as it was. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lazyparams.analysis.memory import estimate_peak_memory
from lazyparams.analysis.memory_model import is_kill
from lazyparams.errors import LazyParamsError
from lazyparams.ir import (
    Binding,
    BlockBuilder,
    Call,
    DataflowBlock,
    Expr,
    ExternFunc,
    Function,
    SeqExpr,
    StructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    prim_value,
    struct_info_of,
)
from lazyparams.transform.base import NamedFunctionPass
from lazyparams.transform.chunk_rows import SET_ROWS, block_const
from lazyparams.transform.chunk_splits import fits, step_split
from lazyparams.transform.kill_plan import insert_kills, plan_kills
from lazyparams.transform.util import HANDOFF, is_handoff, is_op_call, packed_call


@dataclass(frozen=True, slots=True)
class Stream:
    """A concatenation along axis 0 and the row-wise steps and hand-offs that follow it.

    `parts` are the concatenated vars in order, `offsets` the row of the result each starts
    at; `steps` the bindings computed from the result (hand-offs included), in body order;
    `dropped` every binding the rewrite replaces (the concat, the steps, their kills and the
    parts' kills).
    """

    concat: Binding
    parts: tuple[Var, ...]
    offsets: tuple[int, ...]
    steps: tuple[Binding, ...]
    dropped: frozenset[Binding]


class StreamConcat(NamedFunctionPass):
    """Write the parts of each concatenation as they come (see the module docstring).

    `inputs` gives the struct info of every input, for the estimate that keeps a rewrite only
    where it does not raise the peak; `fset_item` names the whole-tensor hand-off.
    """

    def __init__(
        self,
        *,
        inputs: Sequence[StructInfo] | None = None,
        fset_item: str = "set_item",
        func_names: Sequence[str] | None = None,
    ) -> None:
        self.inputs = None if inputs is None else tuple(inputs)
        self.fset_item = fset_item
        super().__init__(func_names)

    def transform_function(self, name: str, func: Function) -> Function:
        streams = find_streams(func, self.fset_item)
        if not streams:
            return func
        handoff = tuple(dict.fromkeys((*HANDOFF, self.fset_item)))
        streamed, made = _rewrite(func, streams)
        result = insert_kills(streamed, plan_kills(streamed, made, handoff), handoff)
        return result if self._lowers_peak(func, result) else func

    def _lowers_peak(self, func: Function, streamed: Function) -> bool:
        """Whether `streamed` peaks no higher than `func` (true where no estimate exists)."""
        try:
            before = estimate_peak_memory(func, inputs=self.inputs).peak_bytes
            after = estimate_peak_memory(streamed, inputs=self.inputs).peak_bytes
        except LazyParamsError:
            return True
        return after <= before


def find_streams(func: Function, fset_item: str = "set_item") -> list[Stream]:
    """Every stream of `func` (see the module docstring), in body order."""
    bindings = list(func.bindings())
    finder = _Finder(func, bindings, fset_item)
    return [s for s in map(finder.stream, bindings) if s is not None]


class _Finder:
    """Where each var is defined and who reads it, to grow streams from concatenations."""

    def __init__(self, func: Function, bindings: list[Binding], fset_item: str) -> None:
        self.fset_item = fset_item
        self.position = {b.var: i for i, b in enumerate(bindings)}
        self.readers: dict[Var, list[Binding]] = {}
        self.kills: dict[Var, list[Binding]] = {}
        for binding in bindings:
            table = self.kills if is_kill(binding.value) else self.readers
            for var in _operands(binding.value):
                table.setdefault(var, []).append(binding)
        flows = [blk for blk in func.body.blocks if isinstance(blk, DataflowBlock)]
        self.dataflow = {b.var for blk in flows for b in blk.bindings}

    def stream(self, binding: Binding) -> Stream | None:
        """The stream starting at `binding`, if it is a concatenation that can stream."""
        parts = self._parts(binding)
        if parts is None:
            return None
        sinfo = struct_info_of(binding.var)
        assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
        length = sinfo.static_shape[0]
        steps = self._steps(binding.var, length, min(self.position[p] for p in parts))
        if steps is None:
            return None
        values = [binding.var, *(s.var for s in steps)]
        dropped = {binding, *steps}
        dropped.update(k for var in (*values, *parts) for k in self.kills.get(var, ()))
        return Stream(binding, parts, _offsets(parts), tuple(steps), frozenset(dropped))

    def _parts(self, binding: Binding) -> tuple[Var, ...] | None:
        """The parts of a concatenation along axis 0 that only it reads, or None."""
        value = binding.value
        if not is_op_call(value, "concat") or binding.var in self.dataflow:
            return None
        assert isinstance(value, Call)
        if value.attrs.get("axis", 0) != 0 or not isinstance(value.args[0], Tuple):
            return None
        parts = tuple(p for p in value.args[0].fields if isinstance(p, Var))
        if len(parts) < 2 or len(parts) != len(value.args[0].fields):
            return None
        if len(set(parts)) != len(parts) or not _static(binding.var):
            return None
        if any(p not in self.position or self.readers.get(p) != [binding] for p in parts):
            return None
        return parts

    def _steps(self, start: Var, length: int, first_part: int) -> list[Binding] | None:
        """The steps and hand-offs computed from `start`, in body order, when each keeps
        rows apart and takes nothing made after the first part; else None."""
        splits: dict[Var, object] = {start: 0}
        found: dict[Var, Binding] = {}
        pending = [start]
        while pending:
            for reader in self.readers.get(pending.pop(), ()):
                if reader.var in found:
                    continue
                if not self._takes(reader, splits, length, first_part):
                    return None
                found[reader.var] = reader
                if not is_handoff(reader.value, (self.fset_item,)):
                    pending.append(reader.var)
        steps = sorted(found.values(), key=lambda b: self.position[b.var])
        if not any(is_handoff(b.value, (self.fset_item,)) for b in steps):
            return None
        return steps

    def _takes(
        self, binding: Binding, splits: dict[Var, object], length: int, first_part: int
    ) -> bool:
        """Whether `binding` runs part by part: a hand-off of rows, or a step whose result
        splits along axis 0 and whose other operands exist before the first part."""
        value = binding.value
        if binding.var in self.dataflow:
            return False
        others = [v for v in _operands(value) if v not in splits]
        if any(self.position.get(v, -1) >= first_part for v in others):
            return False
        if is_handoff(value, (self.fset_item,)):
            assert isinstance(value, Call)
            given = value.args[1] if len(value.args) > 1 else None
            return isinstance(given, Var) and splits.get(given) == 0
        split = step_split(value, splits, length)  # type: ignore[arg-type]
        if split is None or not _along_rows(split):
            return False
        if not fits(struct_info_of(binding.var), split, length):
            return False
        splits[binding.var] = split
        return True


def _operands(value: object) -> list[Var]:
    """The vars a binding's value reads directly (a tuple's fields included)."""
    if isinstance(value, Var):
        return [value]
    found: list[Var] = []
    for arg in getattr(value, "args", ()) or (getattr(value, "tuple_value", None),):
        if isinstance(arg, Var):
            found.append(arg)
        elif isinstance(arg, Tuple):
            found += [f for f in arg.fields if isinstance(f, Var)]
    return found


def _along_rows(split: object) -> bool:
    """Whether a value (or every field of a tuple) splits along axis 0."""
    if isinstance(split, tuple):
        return all(_along_rows(s) for s in split)
    return split == 0


def _static(var: Var) -> bool:
    sinfo = struct_info_of(var)
    return isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None


def _offsets(parts: Sequence[Var]) -> tuple[int, ...]:
    """The row of the concatenation each part starts at."""
    offsets, row = [], 0
    for part in parts:
        offsets.append(row)
        sinfo = struct_info_of(part)
        assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
        row += sinfo.static_shape[0]
    return tuple(offsets)


def _rewrite(func: Function, streams: Sequence[Stream]) -> tuple[Function, list[Var]]:
    """`func` with every stream's steps run after each part, and the vars whose kills must be
    planned again (the parts and every value made for a part)."""
    dropped = {b for s in streams for b in s.dropped}
    after: dict[Var, list[tuple[Stream, int]]] = {}
    for stream in streams:
        for index, part in enumerate(stream.parts):
            after.setdefault(part, []).append((stream, index))
    bb = BlockBuilder()
    for var in (*func.params, *(b.var for b in func.bindings())):
        bb.names.reserve(var.name_hint)
    made: list[Var] = [p for s in streams for p in s.parts]
    for block in func.body.blocks:
        bb.begin_block(isinstance(block, DataflowBlock))
        for binding in block.bindings:
            if binding not in dropped:
                bb.emit_binding(binding)
            for stream, index in after.get(binding.var, ()):
                made += _emit_part(bb, stream, index)
    bb.end_block()
    body = SeqExpr(bb.take_blocks(), func.body.body)
    return Function(func.params, body, func.ret_struct_info, False, func.attrs), made


def _emit_part(bb: BlockBuilder, stream: Stream, index: int) -> list[Var]:
    """Emit the stream's steps on part `index` and write its rows; returns the new vars."""
    part, start = stream.parts[index], stream.offsets[index]
    sinfo = struct_info_of(part)
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
    bounds = (start, start + sinfo.static_shape[0])
    total = _rows(stream.concat.var)
    remap: dict[Var, Var] = {stream.concat.var: part}
    last = index == len(stream.parts) - 1
    for binding in stream.steps:
        value = binding.value
        if isinstance(value, Call) and isinstance(value.op, ExternFunc):  # a hand-off
            given = value.args[1]
            assert isinstance(given, Var)
            store = packed_call(
                ExternFunc(SET_ROWS), [value.args[0], prim_value(start), remap[given]]
            )
            if last:  # the last part's receipt stands for the whole output
                bb.emit_binding(VarBinding(binding.var, store))
            else:
                bb.emit(store, "lv")
            continue
        remap[binding.var] = bb.emit(_on_part(value, remap, binding.var, total, bounds), "part")
    return [v for v in remap.values() if v is not part]


def _on_part(
    value: Expr, remap: dict[Var, Var], var: Var, total: int, bounds: tuple[int, int]
) -> Expr:
    """A step on one part: the stream's values replaced by the part's, constants that vary
    along the rows cut to the part's."""
    if isinstance(value, Var):
        return remap[value]
    if isinstance(value, TupleGetItem):
        assert isinstance(value.tuple_value, Var)
        return TupleGetItem(remap[value.tuple_value], value.index)
    assert isinstance(value, Call)
    out = struct_info_of(var)
    args = tuple(
        remap.get(a, a) if isinstance(a, Var) else block_const(a, out, 0, total, bounds)
        for a in value.args
    )
    return Call(value.op, args, value.attrs, value.sinfo_args)


def _rows(var: Var) -> int:
    sinfo = struct_info_of(var)
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
    return sinfo.static_shape[0]
