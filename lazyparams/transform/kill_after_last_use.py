"""KillAfterLastUse: free every value the function owns right after its last use.

A value is killed once all vars sharing its storage are done with it. Params, returned values
and values given to a hand-off callee (`set_item`, `fset_output` by default, the names the VM
counts as hand-offs) are never killed, since someone else holds them; neither is what a
hand-off returns. The kills are impure, so a function that gets any becomes impure and loses
its dataflow blocks. Inside an If branch only the branch's own values are killed; what it
reads from outside dies at the If binding. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.analysis.liveness import used_vars
from lazyparams.errors import TransformError
from lazyparams.ir import Function, If, ObjectStructInfo, SeqExpr, VarBinding
from lazyparams.transform.base import FunctionPass
from lazyparams.transform.kill_plan import insert_kills, plan_kills
from lazyparams.transform.to_non_dataflow import to_non_dataflow
from lazyparams.transform.util import HANDOFF


class KillAfterLastUse(FunctionPass):
    """Inserts `R.vm.kill_object(v)` after the last use of every owned value `v`.

    `handoff` names the externs and callback params that take ownership of their operands.
    """

    def __init__(self, handoff: Sequence[str] = HANDOFF) -> None:
        if isinstance(handoff, str) or not all(isinstance(h, str) for h in handoff):
            raise TransformError(
                f"KillAfterLastUse: expected handoff to be a list of callee names, got {handoff!r}"
            )
        self.handoff = frozenset(handoff)

    def transform_function(self, name: str, func: Function) -> Function:
        killed = kill_after_last_use(func, self.handoff)
        if killed is func:
            return func
        impure = Function(killed.params, killed.body, killed.ret_struct_info, False, killed.attrs)
        return to_non_dataflow(impure)


def kill_after_last_use(func: Function, handoff: frozenset[str]) -> Function:
    """`func` with its kills, those of each If branch's own values inside the branch."""
    func = _with_branch_kills(func, handoff)
    plan = plan_kills(func, [b.var for b in func.bindings()], handoff)
    return insert_kills(func, plan, handoff) if plan else func


def _with_branch_kills(func: Function, handoff: frozenset[str]) -> Function:
    """`func` with kills inside its If branches (itself when none is needed)."""
    blocks, changed = [], False
    for block in func.body.blocks:
        bindings = []
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, If):
                killed = value.with_branches(lambda branch: _branch_kills(branch, handoff))
                if killed is not value:
                    binding, changed = VarBinding(binding.var, killed), True
            bindings.append(binding)
        blocks.append(type(block)(tuple(bindings)))
    if not changed:
        return func
    body = SeqExpr(tuple(blocks), func.body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _branch_kills(branch: SeqExpr, handoff: frozenset[str]) -> SeqExpr:
    """A branch with kills of the values it makes itself; what it reads from outside is held
    as params are (it dies at the If binding, if at all), and its result escapes."""
    outer = tuple(used_vars(branch))
    killed = kill_after_last_use(Function(outer, branch, ObjectStructInfo()), handoff)
    return killed.body
