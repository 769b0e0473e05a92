"""ToNonDataflow: turn every dataflow block into a plain block and its DataflowVars into Vars.

If branches are flattened the same way, each into one plain block of its own.
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
    If,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
)
from lazyparams.transform.base import FunctionPass


def to_non_dataflow(func: Function) -> Function:
    """`func` without dataflow blocks, in its body or any If branch (itself when it has none)."""
    if not _has_dataflow(func.body):
        return func
    body = _plain_seq(func.body, ExprMutator())
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _has_dataflow(seq: SeqExpr) -> bool:
    """Whether `seq`, or an If branch inside it, holds a dataflow block."""
    for block in seq.blocks:
        if isinstance(block, DataflowBlock):
            return True
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, If) and (
                _has_dataflow(value.true_branch) or _has_dataflow(value.false_branch)
            ):
                return True
    return False


def _plain_seq(seq: SeqExpr, mutator: ExprMutator) -> SeqExpr:
    """`seq` as one plain block, DataflowVars renamed to Vars as they are defined."""
    bindings = []
    for block in seq.blocks:
        for binding in block.bindings:
            if isinstance(binding.var, DataflowVar):
                mutator.var_remap[binding.var] = Var(binding.var.name_hint, binding.var.struct_info)
            bindings.append(_renamed(binding, mutator))
    blocks = (BindingBlock(tuple(bindings)),) if bindings else ()
    return SeqExpr(blocks, mutator.visit_expr(seq.body))


def _renamed(binding: Binding, mutator: ExprMutator) -> Binding:
    var = mutator.var_remap.get(binding.var, binding.var)
    assert isinstance(var, Var)
    value = binding.value
    if isinstance(value, If):
        cond = mutator.visit_expr(value.cond)
        value = value.with_branches(lambda branch: _plain_seq(branch, mutator), cond)
    else:
        value = mutator.visit_expr(value)
    if isinstance(binding, MatchCast):
        return MatchCast(var, value, binding.struct_info)
    return VarBinding(var, value)


class ToNonDataflow(FunctionPass):
    """Rewrites every Relax function of the module into plain binding blocks."""

    def transform_function(self, name: str, func: Function) -> Function:
        return to_non_dataflow(func)
