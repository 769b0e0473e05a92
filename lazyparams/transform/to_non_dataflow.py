"""ToNonDataflow: turn every dataflow block into a plain block and its DataflowVars into Vars.

Passes that put impure calls (loads, hand-offs, kills) among pure bindings use it, since a
dataflow block may hold only pure bindings. Adjacent plain blocks are merged into one.
Imports `ir`.
"""

from __future__ import annotations

from lazyparams.ir import (
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    ExprMutator,
    Function,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
)
from lazyparams.transform.base import FunctionPass


def to_non_dataflow(func: Function) -> Function:
    """`func` without dataflow blocks (itself when it has none)."""
    if not any(isinstance(b, DataflowBlock) for b in func.body.blocks):
        return func
    mutator = ExprMutator()
    for binding in func.bindings():
        if isinstance(binding.var, DataflowVar):
            mutator.var_remap[binding.var] = Var(binding.var.name_hint, binding.var.struct_info)
    bindings = tuple(_renamed(binding, mutator) for binding in func.bindings())
    blocks = (BindingBlock(bindings),) if bindings else ()
    body = SeqExpr(blocks, mutator.visit_expr(func.body.body))
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _renamed(binding: Binding, mutator: ExprMutator) -> Binding:
    var = mutator.var_remap.get(binding.var, binding.var)
    assert isinstance(var, Var)
    value = mutator.visit_expr(binding.value)
    if isinstance(binding, MatchCast):
        return MatchCast(var, value, binding.struct_info)
    return VarBinding(var, value)


class ToNonDataflow(FunctionPass):
    """Rewrites every Relax function of the module into plain binding blocks."""

    def transform_function(self, name: str, func: Function) -> Function:
        return to_non_dataflow(func)
