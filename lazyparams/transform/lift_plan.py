"""The mechanics of LiftTransformParams: plan what moves, build the transform, rebuild the model.

For one Relax function with `num_input` (its params after the first `num_input` are weights):
1. plan: a pure binding is lifted when it reads only weights, lifted values and weight-free
   values, and at least one weight or lifted value (a weight-free value such as `R.ones` stays,
   and is copied into the transform when a lifted binding reads it); `R.builtin.stop_lift_params`
   is a barrier: its operand is lifted, the call and what follows it are not; a binding whose
   struct info needs a symbolic dim that only the runtime inputs define stays;
2. the outputs are the weights the remaining model reads as they are (in param order), then the
   lifted values it reads (in binding order); dims only the weights define that the model still
   needs are returned before them as one `R.shape` (TVM's `vars_from_compile_time_params`);
3. build the transform `(params: R.Tuple(weights))` (`num_input` 0), one dataflow block loading
   each weight at its first use and returning the outputs, with symbolic vars of its own;
4. rebuild the model function on its runtime inputs and one param per output;
5. `finished`: both cleaned up (`lift_canonical`), the transform composed after an existing one
   and, for `consume_params`, resetting each slot of `params` after its read (`with_resets`).
Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from lazyparams.analysis.liveness import used_vars
from lazyparams.analysis.memory_model import reset_slot
from lazyparams.errors import TransformError
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    DataflowBlock,
    DataflowVar,
    ExprMutator,
    Function,
    If,
    IRModule,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    StructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    is_pure_call,
    struct_info_of,
)
from lazyparams.ir.fresh_vars import with_fresh_prim_vars
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.op import call_pure_packed
from lazyparams.transform.lift_canonical import canonical
from lazyparams.transform.util import definable_prim_vars, erase_dims, is_op_call, prim_vars

SUFFIX = "_transform_params"
TUPLE_RESET = "vm.builtin.tuple_reset_item"
UNIT = TupleStructInfo(())
BARRIER = "builtin.stop_lift_params"


@dataclass(slots=True)
class LiftPlan:
    """What one function's lifting moves: lifted binding vars, weight-free vars, barriers
    (binding var -> the lifted operand it stands for) and the transform's outputs."""

    weights: tuple[Var, ...]
    lifted: set[Var] = field(default_factory=set)
    weight_free: set[Var] = field(default_factory=set)
    barriers: dict[Var, Var] = field(default_factory=dict)
    outputs: list[Var] = field(default_factory=list)
    propagated: list[PrimVar] = field(default_factory=list)
    """Symbolic vars only the weights define that the model still needs: the transform returns
    them first as `R.shape([...])`, the model takes that shape as a param (as TVM does)."""


# Step 1-2: the plan --------------------------------------------------------------------------


def plan_lift(func: Function, first_weight: int) -> LiftPlan:
    plan = LiftPlan(func.params[first_weight:])
    known = set(plan.weights)
    runtime_dims = set(definable_prim_vars(p.struct_info for p in func.params[:first_weight]))
    weight_dims = set(definable_prim_vars(w.struct_info for w in plan.weights))
    for binding in func.bindings():
        reads = used_vars(binding.value)
        if is_op_call(binding.value, BARRIER) and reads and reads[0] in known | plan.lifted:
            plan.barriers[binding.var] = reads[0]
        elif _liftable(binding, reads, plan, runtime_dims - weight_dims):
            target = plan.weight_free if not set(reads) & (known | plan.lifted) else plan.lifted
            target.add(binding.var)
    plan.outputs = model_reads(func, plan)
    plan.propagated = propagated_dims(func, plan)
    return plan


def propagated_dims(func: Function, plan: LiftPlan) -> list[PrimVar]:
    """`plan.propagated` for its outputs: the dims the weights define, the model reads, and
    neither the runtime inputs nor the outputs' struct info define."""
    first = len(func.params) - len(plan.weights)
    kept = [b for b in func.bindings() if _stays(b, plan)]
    needed = set(prim_vars([[b.value, b.var.struct_info] for b in kept]))
    needed |= set(prim_vars([func.body.body, func.ret_struct_info]))
    defined = definable_prim_vars(p.struct_info for p in func.params[:first])
    defined += definable_prim_vars(v.struct_info for v in plan.outputs)
    weight_dims = definable_prim_vars(w.struct_info for w in plan.weights)
    return [v for v in weight_dims if v in needed and v not in defined]


def _liftable(
    binding: Binding, reads: list[Var], plan: LiftPlan, runtime_only: set[PrimVar]
) -> bool:
    """Pure, reads nothing computed at run time, needs no dim only the runtime inputs bind;
    an If is never lifted (as TVM keeps it, the weights it reads stay params of the model)."""
    value = binding.value
    if isinstance(value, If):
        return False
    if isinstance(binding, MatchCast) or (isinstance(value, Call) and not is_pure_call(value)):
        return False
    if not all(v in plan.lifted or v in plan.weight_free or v in plan.weights for v in reads):
        return False
    return not set(prim_vars([binding.var.struct_info, value])) & runtime_only


def model_reads(func: Function, plan: LiftPlan) -> list[Var]:
    """Weights, then lifted values, that what stays in the model function reads directly."""
    wanted: dict[Var, None] = {}
    for binding in func.bindings():
        if binding.var in plan.barriers:
            wanted[plan.barriers[binding.var]] = None
        elif binding.var not in plan.lifted:
            wanted.update(dict.fromkeys(used_vars(binding.value)))
    wanted.update(dict.fromkeys(used_vars(func.body.body)))
    order = [*plan.weights, *(b.var for b in func.bindings() if b.var in plan.lifted)]
    return [v for v in order if v in wanted]


# Step 3: the transform function ---------------------------------------------------------------


def build_transform(func: Function, plan: LiftPlan) -> Function:
    """The transform of `plan`; one passing every weight through in order returns its param
    as it is, and one with no outputs an empty tuple (as TVM normalises both)."""
    # a dim the weights use but do not define (`m * n`) is unknown here: such shapes are erased
    known = definable_prim_vars(_sinfo(w) for w in plan.weights)
    loaded = {w: erase_dims(_sinfo(w), known) for w in plan.weights}
    sinfo = TupleStructInfo(tuple(loaded.values()))
    params = Var("params", sinfo)
    if not plan.lifted and not plan.propagated and list(plan.outputs) == list(plan.weights):
        body = SeqExpr((), params if plan.weights else Tuple(()))
        return with_fresh_prim_vars(Function((params,), body, sinfo, True, {"num_input": 0}))
    needed = _needed(func, plan)
    mutator = ExprMutator()
    bindings: list[Binding] = []

    def load(weight: Var) -> None:
        if weight not in mutator.var_remap:
            local = DataflowVar(weight.name_hint, loaded[weight])
            bindings.append(VarBinding(local, TupleGetItem(params, plan.weights.index(weight))))
            mutator.var_remap[weight] = local

    for binding in func.bindings():
        if binding.var not in needed:
            continue
        for var in used_vars(binding.value):
            if var in plan.weights:
                load(var)
        local = DataflowVar(binding.var.name_hint, binding.var.struct_info)
        bindings.append(VarBinding(local, mutator.visit_expr(binding.value)))
        mutator.var_remap[binding.var] = local
    for var in plan.outputs:
        if var in plan.weights:
            load(var)
    fields = tuple(mutator.visit_expr(v) for v in plan.outputs)
    if plan.propagated:
        fields = (ShapeExpr(tuple(plan.propagated)), *fields)
    ret = TupleStructInfo(tuple(struct_info_of(f) for f in fields))
    result = Var("gv", ret)
    bindings.append(VarBinding(result, Tuple(fields)))
    body = SeqExpr((DataflowBlock(tuple(bindings)),), result)
    return with_fresh_prim_vars(Function((params,), body, ret, True, {"num_input": 0}))


def with_resets(transform: Function, tuples: Collection[Var] | None = None) -> Function:
    """`transform` resetting the slot of its tuple param (or of each var in `tuples`) right
    after each read of it, so a weight is freed after its last use (`consume_params`; see
    `runtime.tuple_reset`)."""
    targets = set(tuples) if tuples is not None else {transform.params[0]}
    blocks = []
    for block in transform.body.blocks:
        bindings: list[Binding] = []
        for binding in block.bindings:
            bindings.append(binding)
            value = binding.value
            if isinstance(value, TupleGetItem) and value.tuple_value in targets:
                index = PrimValue(IntImm(value.index, "int32"))
                reset = call_pure_packed(TUPLE_RESET, value.tuple_value, index, sinfo_args=UNIT)
                kind = DataflowVar if isinstance(block, DataflowBlock) else Var
                bindings.append(VarBinding(kind("_", UNIT), reset))
        blocks.append(type(block)(tuple(bindings)))
    body = SeqExpr(tuple(blocks), transform.body.body)
    return Function(
        transform.params, body, transform.ret_struct_info, transform.is_pure, transform.attrs
    )


def without_resets(func: Function) -> tuple[Function, set[Var]]:
    """`func` without its tuple_reset_item calls, and the tuples they reset: a pass that
    reorders bindings takes them out and puts them back after each read (`with_resets`), as
    nothing in the data flow keeps a reset after the read of its slot."""
    reset: set[Var] = set()
    blocks = []
    for block in func.body.blocks:
        kept = []
        for binding in block.bindings:
            slot = reset_slot(binding.value)
            if slot is not None and isinstance(slot[0], Var):
                reset.add(slot[0])
            else:
                kept.append(binding)
        blocks.append(type(block)(tuple(kept)))
    if not reset:
        return func, reset
    body = SeqExpr(tuple(blocks), func.body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs), reset


def _needed(func: Function, plan: LiftPlan) -> set[Var]:
    """The lifted and weight-free bindings the outputs need, transitively."""
    needed: set[Var] = set()
    pending = [v for v in plan.outputs if v in plan.lifted]
    values = {b.var: b.value for b in func.bindings()}
    while pending:
        var = pending.pop()
        if var in needed:
            continue
        needed.add(var)
        pending += [v for v in used_vars(values[var]) if v in plan.lifted | plan.weight_free]
    return needed


def _sinfo(var: Var) -> StructInfo:
    if var.struct_info is None:
        raise TransformError(
            f"LiftTransformParams: expected weight {var.name_hint!r} to declare its struct info"
        )
    return var.struct_info


# Step 4: the model function -------------------------------------------------------------------


def build_model(func: Function, plan: LiftPlan) -> Function:
    first = len(func.params) - len(plan.weights)
    mutator = ExprMutator()
    new_params = []
    for var in plan.outputs:
        param = var if var in plan.weights else Var(var.name_hint, var.struct_info)
        mutator.var_remap[var] = param
        new_params.append(param)
    if plan.propagated:
        dims = Var("vars_from_compile_time_params", ShapeStructInfo(tuple(plan.propagated)))
        new_params.insert(0, dims)
    for barrier, operand in plan.barriers.items():
        mutator.var_remap[barrier] = mutator.var_remap[operand]
    blocks = []
    for block in func.body.blocks:
        kept = tuple(_rebuilt(b, mutator) for b in block.bindings if _stays(b, plan))
        if kept:
            kind = DataflowBlock if isinstance(block, DataflowBlock) else BindingBlock
            blocks.append(kind(kept))
    body = SeqExpr(tuple(blocks), mutator.visit_expr(func.body.body))
    params = (*func.params[:first], *new_params)
    return Function(params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _stays(binding: Binding, plan: LiftPlan) -> bool:
    return binding.var not in plan.lifted and binding.var not in plan.barriers


def _rebuilt(binding: Binding, mutator: ExprMutator) -> Binding:
    value = mutator.visit_expr(binding.value)
    if isinstance(binding, MatchCast):
        return MatchCast(binding.var, value, binding.struct_info)
    return VarBinding(binding.var, value)


def finished(
    func: Function, plan: LiftPlan, existing: Function | None, consume_params: bool
) -> tuple[Function, Function]:
    """(transform, model) of `plan`, cleaned up as TVM's pass leaves them (`lift_canonical`);
    the transform runs after `existing` when there is one, and resets what it loads when
    `consume_params`."""
    transform = canonical(build_transform(func, plan), drop_unused=True)
    if existing is not None:
        transform = compose(existing, transform)
    if consume_params:
        transform = with_resets(transform)
    return transform, finished_model(func, plan)


def finished_model(func: Function, plan: LiftPlan) -> Function:
    """The model function of `plan`, cleaned up as TVM's pass leaves it."""
    return canonical(build_model(func, plan), drop_unused=False)


def relax_function(mod: IRModule, name: str, pass_name: str) -> Function:
    """The function `name` of `mod`, which must be a Relax function."""
    func = mod[name]
    if not isinstance(func, Function):
        raise TransformError(
            f"{pass_name}: expected {name!r} to be a Relax function, got a {type(func).__name__}"
        )
    return func


# Composition with an existing transform -------------------------------------------------------


def compose(first: Function, then: Function) -> Function:
    """One transform running `first` on the weights, then `then` on what `first` returns.

    `then`'s tuple param is replaced by `first`'s result; `first`'s params stay the params, so a
    caller keeps passing the original weights.
    """
    blocks = list(first.body.blocks)
    result = first.body.body
    if not isinstance(result, Var):
        bound = Var("previous", struct_info_of(result))
        blocks.append(BindingBlock((VarBinding(bound, result),)))
        result = bound
    mutator = ExprMutator()
    mutator.var_remap[then.params[0]] = result
    body = mutator.visit_expr(then.body)
    assert isinstance(body, SeqExpr)
    merged = SeqExpr((*blocks, *body.blocks), body.body)
    return Function(first.params, merged, then.ret_struct_info, True, then.attrs)
