"""Which params of a transform function are weights, and where each weight is read.

Weights are the params after the `num_input` runtime inputs: either one tuple param (read as
`params[i]`) or one param per weight. A read that needs the tensor's struct info (an op
operand, say) makes its load typed with a `match_cast`; reads by `call_tir`, externs and
hand-offs take the opaque object as is; a read inside an If branch counts as a read by the If
binding. Imports `ir`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from lazyparams.errors import TransformError
from lazyparams.ir import (
    Binding,
    Call,
    Expr,
    ExternFunc,
    Function,
    If,
    ObjectStructInfo,
    StructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
)
from lazyparams.transform.util import is_op_call, prim_vars

OUTSIDE = -1
"""Block id of reads by the function's result expression."""


@dataclass(frozen=True, slots=True)
class WeightInputs:
    """The weights of one function: params that become loads, their struct info and names."""

    runtime: tuple[Var, ...]
    weights: tuple[Var, ...]
    tuple_param: Var | None
    sinfos: tuple[StructInfo, ...]
    names: tuple[str, ...]
    positions: dict[Var, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        unpacked = (
            {} if self.tuple_param is not None else {w: i for i, w in enumerate(self.weights)}
        )
        object.__setattr__(self, "positions", unpacked)

    def index_of(self, expr: Expr) -> int | None:
        """The weight index `expr` reads directly (`params[i]` or a weight param), if any."""
        if self.tuple_param is not None:
            if isinstance(expr, TupleGetItem) and expr.tuple_value is self.tuple_param:
                return expr.index
            return None
        return self.positions.get(expr) if isinstance(expr, Var) else None


def weight_inputs(func: Function, first_weight: int) -> WeightInputs:
    """The weights of `func`: the params from `first_weight` on (none when it equals the count).

    One weight param typed as a tuple is read field by field; otherwise each param is a weight.
    Names come from the function's recorded `input_names` when it has one per weight.
    """
    runtime, weights = func.params[:first_weight], func.params[first_weight:]
    sinfo = weights[0].struct_info if len(weights) == 1 else None
    tuple_param = weights[0] if isinstance(sinfo, TupleStructInfo) else None
    if isinstance(sinfo, TupleStructInfo):
        sinfos = sinfo.fields
        names = tuple(f"{weights[0].name_hint}_{i}" for i in range(len(sinfos)))
    else:
        sinfos = tuple(w.struct_info or ObjectStructInfo() for w in weights)
        names = tuple(w.name_hint for w in weights)
    recorded = func.attrs.get("input_names")
    if isinstance(recorded, tuple | list) and len(recorded) == len(sinfos):
        names = tuple(map(str, recorded))
    return WeightInputs(runtime, weights, tuple_param, sinfos, names)


@dataclass(slots=True)
class WeightReads:
    """Where each weight is read.

    `aliases` maps a var bound to a weight read (`lv = params[1]`) to the weight; `reads[b]`
    lists the weights binding b reads (not counting alias bindings); `blocks[i]` the blocks
    reading weight i (`OUTSIDE` for the result); `typed` the weights some read needs typed.
    """

    aliases: dict[Var, int] = field(default_factory=dict)
    reads: list[list[int]] = field(default_factory=list)
    result_reads: list[int] = field(default_factory=list)
    blocks: dict[int, set[int]] = field(default_factory=dict)
    typed: set[int] = field(default_factory=set)


def weight_reads(
    func: Function, inputs: WeightInputs, opaque_output: Binding | Expr | None, context: str
) -> WeightReads:
    """Collect the reads of every weight of `func`.

    `opaque_output` is the output tuple (its binding, or the result expression) when outputs
    are handed off: its fields then take the opaque loaded object. `context` names the pass
    and function in errors.
    """
    facts = WeightReads()
    walker = _ReadWalker(inputs, facts, context)
    for block_id, block in enumerate(func.body.blocks):
        for binding in block.bindings:
            index = walker.direct(binding.value)
            if isinstance(binding, VarBinding) and index is not None:
                facts.aliases[binding.var] = index
                facts.blocks.setdefault(index, set()).add(block_id)
                facts.reads.append([])
                continue
            safe = binding is opaque_output
            found = walker.reads(binding.value, safe, binding.var.name_hint)
            facts.reads.append(_record(facts, found, block_id))
    found = walker.reads(func.body.body, func.body.body is opaque_output, "the result")
    facts.result_reads = _record(facts, found, OUTSIDE)
    for i, sinfo in enumerate(inputs.sinfos):
        if prim_vars(sinfo):
            facts.typed.add(i)
    return facts


def _record(facts: WeightReads, found: list[tuple[int, bool]], block_id: int) -> list[int]:
    order: dict[int, None] = {}
    for index, needs_type in found:
        order[index] = None
        facts.blocks.setdefault(index, set()).add(block_id)
        if needs_type:
            facts.typed.add(index)
    return list(order)


class _ReadWalker:
    """Finds weight reads in an expression and whether each needs the tensor's struct info."""

    def __init__(self, inputs: WeightInputs, facts: WeightReads, context: str) -> None:
        self.inputs, self.facts, self.context = inputs, facts, context

    def direct(self, expr: Expr) -> int | None:
        """The weight `expr` is (a direct read or an alias var), if any."""
        index = self.inputs.index_of(expr)
        if index is None and isinstance(expr, Var):
            index = self.facts.aliases.get(expr)
        if index is not None and not 0 <= index < len(self.inputs.sinfos):
            raise TransformError(
                f"{self.context}: expected an index of params below "
                f"{len(self.inputs.sinfos)}, got params[{index}]"
            )
        return index

    def reads(self, expr: Expr, safe: bool, where: str) -> list[tuple[int, bool]]:
        """(weight, needs type) for every read inside `expr`, in evaluation order."""
        return list(self._walk(expr, safe, where))

    def _walk(self, expr: Expr, safe: bool, where: str) -> Iterator[tuple[int, bool]]:
        index = self.direct(expr)
        if index is not None:
            yield index, not safe
        elif expr is self.inputs.tuple_param:
            raise TransformError(
                f"{self.context}, binding {where!r}: expected the weight "
                f"tuple {expr.name_hint!r} to be read only as {expr.name_hint}[i], got a use "
                "of the whole tuple"
            )
        elif isinstance(expr, Call):
            yield from self._walk_call(expr, where)
        elif isinstance(expr, Tuple):
            for item in expr.fields:
                yield from self._walk(item, safe, where)
        elif isinstance(expr, TupleGetItem):
            yield from self._walk(expr.tuple_value, False, where)
        elif isinstance(expr, If):
            yield from self._walk_if(expr, where)

    def _walk_if(self, node: If, where: str) -> Iterator[tuple[int, bool]]:
        """Reads in the condition and both branches, all typed: the weights load before the
        If, once, whichever branch runs."""
        yield from self._walk(node.cond, False, where)
        for branch in (node.true_branch, node.false_branch):
            for block in branch.blocks:
                for binding in block.bindings:
                    yield from self._walk(binding.value, False, where)
            yield from self._walk(branch.body, False, where)

    def _walk_call(self, call: Call, where: str) -> Iterator[tuple[int, bool]]:
        opaque = isinstance(call.op, ExternFunc | Var)
        for position, arg in enumerate(call.args):
            # call_tir's operand tuple and extern operands accept an untyped object
            safe = opaque or (is_op_call(call, "call_tir") and position == 1)
            yield from self._walk(arg, safe, where)
