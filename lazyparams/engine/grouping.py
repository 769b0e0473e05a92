"""The units a partitioned plan is made of: groups of outputs that share their computation.

One pass over the traced function joins every output with the steps it needs; outputs that
read a common input are then joined too (tied embeddings, fused groups, stacked experts) while
the joined unit stays within a size, so such an input is read once. Each unit has a signature,
equal for units that differ only in which tensors they name, so one compiled plan serves all
of them. Imports `ir`, `analysis` and the engine's own modules.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lazyparams.analysis.liveness import used_vars
from lazyparams.engine.compile import FUNC, function_of, output_infos
from lazyparams.io import TensorInfo
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    ExternFunc,
    Function,
    GlobalVar,
    IRModule,
    Op,
    SeqExpr,
    StructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
    structural_hash,
)


@dataclass(frozen=True, slots=True)
class Unit:
    """Outputs (positions in output order) computed together, the inputs they read (indices,
    in order of first use) and the signature of the computation (names aside)."""

    outputs: tuple[int, ...]
    inputs: tuple[int, ...]
    signature: Hashable
    reads: tuple[tuple[Var, ...], ...] = field(default=(), compare=False, repr=False)
    """The vars that read each input, in the order of `inputs`."""
    steps: tuple[Binding, ...] = field(default=(), compare=False, repr=False)
    """The unit's bindings other than reads, in traced order."""


class _Joiner:
    """Union-find over hashable keys."""

    def __init__(self) -> None:
        self.parent: dict[Hashable, Hashable] = {}

    def find(self, key: Hashable) -> Hashable:
        root = self.parent.setdefault(key, key)
        while root != self.parent[root]:
            root = self.parent[root]
        while key != root:  # path compression keeps later finds short
            self.parent[key], key = root, self.parent[key]
        return root

    def join(self, a: Hashable, b: Hashable) -> None:
        self.parent[self.find(a)] = self.find(b)

    def roots(self) -> dict[Hashable, Hashable]:
        """The root of every key seen so far, for lookups once the joining is done."""
        return {key: self.find(key) for key in list(self.parent)}


def find_units(traced: IRModule, inputs: Sequence[TensorInfo], join_limit: int) -> list[Unit]:
    """The units of a traced module, in the order of their first output.

    Outputs that read a common input are joined while the joined unit writes at most
    `join_limit` bytes (the largest shared inputs first); an input shared beyond that is read
    by each unit that needs it.
    """
    func = function_of(traced)
    params, bindings = func.params[0], func.bindings()
    result = bindings[-1].value
    assert isinstance(result, Tuple)
    reads = _reads(bindings, params)
    uses = {b.var: _vars_read(b.value) for b in bindings[:-1] if b.var not in reads}
    steps = _Joiner()
    for var, used_by in uses.items():
        steps.find(var)
        for used in used_by:
            if used not in reads and used is not params:
                steps.join(var, used)
    step_root = steps.roots()
    keys = [
        _output_key(field, reads, step_root, position)
        for position, field in enumerate(result.fields)
    ]
    needs = _inputs_of_steps(uses, reads, step_root)
    out_bytes = _bytes_by_key(keys, traced)
    units = _join_shared(keys, needs, inputs, out_bytes, join_limit)
    return _described_units(bindings, keys, units, needs, reads, step_root)


def _vars_read(value: Any) -> list[Var]:
    """`used_vars(value)`, found directly for an op call on vars or tuples of vars (nearly
    every step of a traced model) without the visitor's dispatch."""
    if type(value) is Call and type(value.op) is Op:
        found: dict[Var, None] = {}
        if _collect_vars(value.args, found):
            return list(found)
    return used_vars(value)


def _collect_vars(exprs: Sequence[Any], found: dict[Var, None]) -> bool:
    """Add the vars of `exprs` to `found` in order; False if one is neither a var nor a tuple
    of such (the caller then walks it in full)."""
    for expr in exprs:
        if isinstance(expr, Var):
            found[expr] = None
        elif type(expr) is not Tuple or not _collect_vars(expr.fields, found):
            return False
    return True


def _reads(bindings: Sequence[Binding], params: Var) -> dict[Var, int]:
    """The vars bound to `params[i]`, with their index i."""
    found = {}
    for binding in bindings:
        value = binding.value
        if isinstance(value, TupleGetItem) and value.tuple_value is params:
            found[binding.var] = value.index
    return found


def _output_key(
    field: Any, reads: dict[Var, int], step_root: dict[Hashable, Hashable], position: int
) -> Hashable:
    """The group of one output: its input (passed through), its steps, or itself (a constant)."""
    if isinstance(field, Var) and field in reads:
        return ("input", reads[field])
    if isinstance(field, Var) and field in step_root:
        return step_root[field]
    return ("output", position)


def _inputs_of_steps(
    uses: dict[Var, list[Var]], reads: dict[Var, int], step_root: dict[Hashable, Hashable]
) -> dict[Hashable, list[int]]:
    """The inputs each group of steps reads (`uses`: the vars each step reads), in order of
    first use."""
    needs: dict[Hashable, dict[int, None]] = {}
    for var, used_by in uses.items():
        group = needs.setdefault(step_root[var], {})
        for used in used_by:
            if used in reads:
                group[reads[used]] = None
    found = {key: list(group) for key, group in needs.items()}
    found.update({("input", i): [i] for i in reads.values()})
    return found


def _bytes_by_key(keys: Sequence[Hashable], traced: IRModule) -> dict[Hashable, int]:
    """Bytes written by each group."""
    sizes: dict[Hashable, int] = {}
    for key, info in zip(keys, output_infos(traced), strict=True):
        sizes[key] = sizes.get(key, 0) + info.nbytes
    return sizes


def _join_shared(
    keys: Sequence[Hashable],
    needs: dict[Hashable, list[int]],
    inputs: Sequence[TensorInfo],
    out_bytes: dict[Hashable, int],
    join_limit: int,
) -> _Joiner:
    """Join the groups that read a common input, largest inputs first, within `join_limit`."""
    users: dict[int, list[Hashable]] = {}
    for key in dict.fromkeys(keys):
        for index in needs.get(key, []):
            users.setdefault(index, []).append(key)
    units, size = _Joiner(), dict(out_bytes)
    for index in sorted(users, key=lambda i: -inputs[i].nbytes):
        first, *rest = users[index]
        for other in rest:
            a, b = units.find(first), units.find(other)
            if a != b and size.get(a, 0) + size.get(b, 0) <= join_limit:
                units.join(a, b)
                size[b] = size.get(a, 0) + size.get(b, 0)
    return units


def _described_units(
    all_bindings: Sequence[Binding],
    keys: Sequence[Hashable],
    units: _Joiner,
    needs: dict[Hashable, list[int]],
    reads: dict[Var, int],
    step_root: dict[Hashable, Hashable],
) -> list[Unit]:
    """Each unit's outputs, inputs (first use) and signature, in order of first output."""
    members: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        members.setdefault(units.find(key), []).append(position)
    of_step = {key: units.find(key) for key in dict.fromkeys(keys)}
    bindings = all_bindings[:-1]
    by_unit: dict[Hashable, list[Any]] = {root: [] for root in members}
    for binding in bindings:
        if binding.var in reads:
            continue
        root = of_step.get(step_root.get(binding.var, binding.var))
        if root is not None:
            by_unit[root].append(binding)
    result = all_bindings[-1].value
    assert isinstance(result, Tuple)
    readers: dict[int, list[Var]] = {}
    for var, index in reads.items():
        readers.setdefault(index, []).append(var)
    found = []
    memo = _SignatureMemo()
    for root, outputs in members.items():
        used = dict.fromkeys(
            i for key in dict.fromkeys(keys[p] for p in outputs) for i in needs.get(key, [])
        )
        fields = [result.fields[p] for p in outputs]
        read_vars = [var for index in used for var in readers[index]]
        signature = _signature(by_unit[root], fields, list(used), read_vars, reads, memo)
        unit_reads = tuple(tuple(readers[index]) for index in used)
        found.append(Unit(tuple(outputs), tuple(used), signature, unit_reads, tuple(by_unit[root])))
    return found


def unit_module(traced: IRModule, unit: Unit) -> IRModule:
    """The traced module of `unit` alone: its params are only the unit's inputs, so compiling
    it costs the unit's size, not the model's."""
    func = function_of(traced)
    params = func.params[0]
    fields = struct_info_of(params).fields  # type: ignore[attr-defined]
    own = Var(params.name_hint, TupleStructInfo(tuple(fields[i] for i in unit.inputs)))
    reads = [
        VarBinding(var, TupleGetItem(own, position))
        for position, readers in enumerate(unit.reads)
        for var in readers
    ]
    result = _last_binding(func)
    assert isinstance(result.value, Tuple)
    values = tuple(result.value.fields[o] for o in unit.outputs)
    ret = TupleStructInfo(tuple(struct_info_of(v) for v in values))
    out = Var(result.var.name_hint, ret)
    body = SeqExpr((BindingBlock((*reads, *unit.steps, VarBinding(out, Tuple(values)))),), out)
    inputs, outputs = func.attrs["input_names"], func.attrs["output_names"]
    attrs = {
        **func.attrs,
        "input_names": tuple(inputs[i] for i in unit.inputs),
        "output_names": tuple(outputs[o] for o in unit.outputs),
    }
    return traced.with_function(FUNC, Function((own,), body, ret, func.is_pure, attrs))


def _last_binding(func: Function) -> Binding:
    """The function's last binding (its output tuple), without listing all of them."""
    return next(block.bindings[-1] for block in reversed(func.body.blocks) if block.bindings)


class _SignatureMemo:
    """What signatures repeat across units, worked out once: the key of each struct info
    object and the description of each op node and attrs."""

    def __init__(self) -> None:
        self.sinfos: dict[int, tuple[StructInfo, Hashable]] = {}
        self.nodes: dict[int, tuple[Any, Hashable]] = {}
        self.attrs: dict[int, tuple[Mapping[str, Any], str]] = {}

    def sinfo_key(self, sinfo: StructInfo) -> Hashable:
        """`_sinfo_key(sinfo)`, once per struct info object."""
        found = self.sinfos.get(id(sinfo))
        if found is None or found[0] is not sinfo:
            found = self.sinfos[id(sinfo)] = (sinfo, _sinfo_key(sinfo))
        return found[1]

    def attrs_key(self, attrs: Mapping[str, Any]) -> str:
        """A call's attrs as sorted, printed pairs, once per attrs object (the calls of one
        stack share theirs)."""
        found = self.attrs.get(id(attrs))
        if found is None or found[0] is not attrs:
            found = self.attrs[id(attrs)] = (attrs, repr(sorted(attrs.items())))
        return found[1]

    def node(self, expr: Any) -> Hashable:
        """`_describe` of an Op, ExternFunc or GlobalVar node, once per node."""
        found = self.nodes.get(id(expr))
        if found is None or found[0] is not expr:
            found = self.nodes[id(expr)] = (expr, (type(expr).__name__, repr(expr)))
        return found[1]


def _signature(
    bindings: Sequence[Any],
    fields: Sequence[Any],
    inputs: Sequence[int],
    read_vars: Sequence[Var],
    reads: dict[Var, int],
    memo: _SignatureMemo | None = None,
) -> Hashable:
    """A description of a unit's computation in which tensors are numbered, not named.

    Inputs are numbered in order of first use, as `unit_module` passes them; where they sit in
    the checkpoint is left out, so the layers of a model share one signature even where a
    shard boundary splits one layer's inputs and not another's."""
    memo = memo or _SignatureMemo()
    position = {index: order for order, index in enumerate(inputs)}
    local = {var: -1 - position[reads[var]] for var in read_vars}
    steps = []
    for binding in bindings:
        sinfo = memo.sinfo_key(struct_info_of(binding.var))
        steps.append((sinfo, _describe(binding.value, local, memo)))
        local[binding.var] = len(local)
    read_infos = tuple(
        sorted((local[v], memo.sinfo_key(struct_info_of(v))) for v in local if local[v] < 0)
    )
    return (tuple(steps), read_infos, tuple(_describe(f, local, memo) for f in fields))


def _sinfo_key(sinfo: StructInfo) -> Hashable:
    """Struct info as plain data: a static tensor as its dtype and shape (cheap to build and
    to hash, as signatures are hashed at each lookup), anything else as its printed form."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None:
        return (sinfo.dtype, sinfo.static_shape)
    return str(sinfo)


def _describe(expr: Any, local: dict[Var, int], memo: _SignatureMemo) -> Hashable:
    """`expr` with vars replaced by their local numbers."""
    if isinstance(expr, Var):
        return ("var", local.get(expr))
    if isinstance(expr, Call):
        args = tuple(
            ("var", local.get(arg)) if isinstance(arg, Var) else _describe(arg, local, memo)
            for arg in expr.args
        )
        attrs = memo.attrs_key(expr.attrs) if expr.attrs else "[]"
        sinfo_args = tuple(map(str, expr.sinfo_args)) if expr.sinfo_args else ()
        return ("call", _describe(expr.op, local, memo), args, attrs, sinfo_args)
    if isinstance(expr, Tuple):
        return ("tuple", tuple(_describe(f, local, memo) for f in expr.fields))
    if isinstance(expr, TupleGetItem):
        return ("item", _describe(expr.tuple_value, local, memo), expr.index)
    if isinstance(expr, Op | ExternFunc | GlobalVar):
        return memo.node(expr)
    return ("other", structural_hash(expr))


__all__ = ["Unit", "find_units", "unit_module"]
