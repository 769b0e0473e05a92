"""The clean-up LiftTransformParams gives both functions it builds, as TVM's pass does.

1. an item of a tuple the function builds itself is that field (`t = (w,); x = t[0]` reads w);
2. a binding of one var to another of the same struct info goes, its uses read the other var;
   an output var of a dataflow block bound to a var of that block takes over that var's binding
   (`y = f(x); out = y` becomes `out = f(x)`);
3. in the transform only, pure bindings nothing reads go.
Imports `ir` and `analysis`.
"""

from __future__ import annotations

from lazyparams.analysis.liveness import used_vars
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExprMutator,
    Function,
    MatchCast,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    is_pure_call,
    structural_equal,
)


def canonical(func: Function, drop_unused: bool) -> Function:
    """`func` with steps 1-2 applied (and 3 when `drop_unused`)."""
    takeovers = _takeovers(func)
    mutator = ExprMutator()
    tuples: dict[Var, Tuple] = {}
    blocks = []
    for block in func.body.blocks:
        kept: list[Binding] = []
        for binding in block.bindings:
            if binding.var in takeovers.values():
                continue  # its value moved to the var it was bound to
            rebuilt = _rebuilt(binding, mutator, tuples, takeovers.get(binding.var))
            if rebuilt is not None:
                kept.append(rebuilt)
        blocks.append(type(block)(tuple(kept)))
    body = SeqExpr(tuple(blocks), mutator.visit_expr(func.body.body))
    if drop_unused:
        body = _without_unused(body)
    body = SeqExpr(tuple(b for b in body.blocks if b.bindings), body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _takeovers(func: Function) -> dict[Var, Var]:
    """dataflow var -> the output var bound to it in the same block (step 2's second case)."""
    found: dict[Var, Var] = {}
    for block in func.body.blocks:
        if not isinstance(block, DataflowBlock):
            continue
        local = {
            b.var
            for b in block.bindings
            if isinstance(b.var, DataflowVar) and isinstance(b, VarBinding)
        }
        for binding in block.bindings:
            value = binding.value
            if (
                isinstance(binding, VarBinding)
                and not isinstance(binding.var, DataflowVar)
                and value in local
                and value not in found
                and _same_sinfo(binding.var, value)
            ):
                assert isinstance(value, Var)
                found[value] = binding.var
    return found


def _rebuilt(
    binding: Binding, mutator: ExprMutator, tuples: dict[Var, Tuple], takeover: Var | None
) -> Binding | None:
    """The binding after steps 1-2, or None when it is a var-to-var binding that goes."""
    value = _folded(mutator.visit_expr(binding.value), tuples)
    if isinstance(binding, MatchCast):
        return MatchCast(binding.var, value, binding.struct_info)
    var = takeover or binding.var
    if takeover is not None:
        mutator.var_remap[binding.var] = takeover
    elif isinstance(value, Var) and _same_sinfo(binding.var, value) and _visible(binding, value):
        mutator.var_remap[binding.var] = value
        return None
    if isinstance(value, Tuple):
        tuples[var] = value
    return VarBinding(var, value)


def _folded(value: Expr, tuples: dict[Var, Tuple]) -> Expr:
    """Step 1, repeated: `t[i]` of a tuple `t = (...)` is its field."""
    while (
        isinstance(value, TupleGetItem)
        and isinstance(value.tuple_value, Var)
        and value.tuple_value in tuples
        and 0 <= value.index < len(tuples[value.tuple_value].fields)
    ):
        value = tuples[value.tuple_value].fields[value.index]
    return value


def _visible(binding: Binding, value: Var) -> bool:
    """Whether `value` may stand for the binding's var wherever that is read: a block-local
    var may not replace an output var of its block."""
    return isinstance(binding.var, DataflowVar) or not isinstance(value, DataflowVar)


def _same_sinfo(a: Var, b: Expr) -> bool:
    return isinstance(b, Var) and structural_equal(a.struct_info, b.struct_info)


def _without_unused(body: SeqExpr) -> SeqExpr:
    """Step 3: drop pure bindings nothing later reads, last to first."""
    live = set(used_vars(body.body))
    blocks: list[BindingBlock] = []
    for block in reversed(body.blocks):
        kept: list[Binding] = []
        for binding in reversed(block.bindings):
            value = binding.value
            impure = isinstance(value, Call) and not is_pure_call(value)
            if binding.var in live or impure or isinstance(binding, MatchCast):
                kept.append(binding)
                live.update(used_vars(value))
        blocks.append(type(block)(tuple(reversed(kept))))
    return SeqExpr(tuple(reversed(blocks)), body.body)
