"""KillAfterLastUse: free every value the function owns right after its last use.

A value is killed once all vars sharing its storage are done with it. Params, returned values
and values given to a hand-off callee (`set_item`, `fset_output` by default, the names the VM
counts as hand-offs) are never killed, since someone else holds them; neither is what a
hand-off returns. The kills are impure, so a function that gets any becomes impure and loses
its dataflow blocks. Imports `ir`, `op` and `analysis`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.errors import TransformError
from lazyparams.ir import Function
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
        plan = plan_kills(func, [b.var for b in func.bindings()], self.handoff)
        if not plan:
            return func
        killed = insert_kills(func, plan, self.handoff)
        impure = Function(killed.params, killed.body, killed.ret_struct_info, False, killed.attrs)
        return to_non_dataflow(impure)
