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

A stack (every part `expand_dims(x, axis=0)`, every step one that works on any rank) runs its
steps on each x itself and writes x's rows as rows of the output's flat view
([experts * rows, columns], see `io.partial.flat_block`): each part is then an ordinary chain
from a load to a row store, which `ChunkRows` splits into blocks of the expert's own rows.
A stream whose values are read elsewhere, live in a dataflow block or take an operand made
after its first part is left as it was. Imports `ir`, `analysis` and the chunker's modules.
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
    Constant,
    DataflowBlock,
    Expr,
    ExternFunc,
    Function,
    Op,
    PrimValue,
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
from lazyparams.transform.chunk_splits import BLOCK_STEPS, ELEMENTWISE, UNARY, fits, step_split
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
    stacked: tuple[Var, ...] = ()
    """When every part is `expand_dims(x, axis=0)` of a tensor of two or more axes (a stack)
    and every step works on any rank: each part's x. The steps then run on x itself and its
    rows are written as rows of the output's flat view (see `io.partial.flat_block`), so that
    `ChunkRows` can split each part into blocks of its own rows."""


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
        self.definition = {b.var: b for b in bindings}
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
        stacked = self._stacked(binding.var, parts, steps)
        dropped.update(self.definition[p] for p in parts if stacked)
        offsets = _offsets(parts)
        return Stream(binding, parts, offsets, tuple(steps), frozenset(dropped), stacked)

    def _stacked(
        self, start: Var, parts: Sequence[Var], steps: Sequence[Binding]
    ) -> tuple[Var, ...]:
        """Each part's stacked tensor, when the stream is a stack that can run without its
        new axis (see `Stream.stacked`), else ()."""
        stacked = []
        for part in parts:
            value = self.definition[part].value
            if not is_op_call(value, "expand_dims"):
                return ()
            assert isinstance(value, Call)
            x = value.args[0]
            if value.attrs.get("axis") not in (0, [0]) or not isinstance(x, Var):
                return ()
            if len(_shape(x)) < 2:
                return ()
            stacked.append(x)
        values = {start, *(step.var for step in steps)}
        return tuple(stacked) if all(_any_rank(s.value, values) for s in steps) else ()

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


ANY_RANK = ELEMENTWISE | UNARY | BLOCK_STEPS
"""Steps that compute the same on a part with or without its leading axis of size 1 (given
constant operands without it)."""


def _any_rank(value: Expr, values: set[Var]) -> bool:
    """Whether a stream's step runs the same on its parts without their new axis: a hand-off,
    or a step of `ANY_RANK` whose operands are the stream's values and constants."""
    if not isinstance(value, Call):
        return isinstance(value, Var)
    if isinstance(value.op, ExternFunc):
        return True  # a hand-off (the only extern a stream holds)
    if not isinstance(value.op, Op) or value.op.name not in ANY_RANK:
        return False
    return all(isinstance(a, Constant | PrimValue) or a in values for a in value.args)


def _along_rows(split: object) -> bool:
    """Whether a value (or every field of a tuple) splits along axis 0."""
    if isinstance(split, tuple):
        return all(_along_rows(s) for s in split)
    return split == 0


def _shape(var: Var) -> tuple[int, ...]:
    """The static shape of a tensor var (() for anything else)."""
    sinfo = struct_info_of(var)
    if isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None:
        return tuple(sinfo.static_shape)
    return ()


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
    bounds = (start, start + _shape(part)[0])
    squeeze = bool(stream.stacked)
    source = stream.stacked[index] if squeeze else part
    first = start * _shape(source)[0] if squeeze else start  # a row of the flat view
    remap: dict[Var, Var] = {stream.concat.var: source}
    last = index == len(stream.parts) - 1
    for binding in stream.steps:
        value = binding.value
        if isinstance(value, Call) and isinstance(value.op, ExternFunc):  # a hand-off
            given = value.args[1]
            assert isinstance(given, Var)
            store = packed_call(
                ExternFunc(SET_ROWS), [value.args[0], prim_value(first), remap[given]]
            )
            if last:  # the last part's receipt stands for the whole output
                bb.emit_binding(VarBinding(binding.var, store))
            else:
                bb.emit(store, "lv")
            continue
        step = _on_part(value, remap, binding.var, bounds, squeeze)
        remap[binding.var] = bb.emit(step, "part")
    return [v for v in remap.values() if v is not source]


def _on_part(
    value: Expr, remap: dict[Var, Var], var: Var, bounds: tuple[int, int], squeeze: bool
) -> Expr:
    """A step on one part: the stream's values replaced by the part's, constants that vary
    along the rows cut to the part's (and, for a squeezed stack, without its new axis)."""
    if isinstance(value, Var):
        return remap[value]
    if isinstance(value, TupleGetItem):
        assert isinstance(value.tuple_value, Var)
        return TupleGetItem(remap[value.tuple_value], value.index)
    assert isinstance(value, Call)
    out = struct_info_of(var)
    assert isinstance(out, TensorStructInfo) and out.static_shape is not None
    args: list[Expr] = []
    for arg in value.args:
        if isinstance(arg, Var):
            args.append(remap.get(arg, arg))
            continue
        cut = block_const(arg, out, 0, out.static_shape[0], bounds)
        args.append(_squeezed(cut, out.ndim) if squeeze else cut)
    return Call(value.op, tuple(args), value.attrs, value.sinfo_args)


def _squeezed(arg: Expr, ndim: int) -> Expr:
    """A constant operand of a stack's step without the stack's axis (its first, of size 1
    once cut to the part) where it has as many axes as the step's result."""
    if isinstance(arg, Constant) and arg.data.ndim == ndim:
        assert arg.data.shape[0] == 1
        return Constant(arg.data[0])
    return arg
