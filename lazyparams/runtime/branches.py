"""What the VM needs to run an If: the truth of its condition and the liveness of each branch.

A branch runs as a function body does, so its liveness is that of a function of no params
whose body is the branch: values it binds itself die inside it, the rest at the If's binding.
Imports `ir`, `analysis` and the runtime's value helpers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyparams.analysis.liveness import Liveness, liveness
from lazyparams.errors import RuntimeExecError
from lazyparams.ir.expr import Function, If, SeqExpr
from lazyparams.ir.struct_info import ObjectStructInfo
from lazyparams.runtime.values import describe_value


def truth(value: Any, where: str) -> bool:
    """An If's condition: a 0-d bool tensor or a bool prim value."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_:
        return bool(value)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise RuntimeExecError(
        f"{where}: the If's condition: expected a 0-d bool tensor or a bool prim value, "
        f"got {describe_value(value)}"
    )


class BranchLiveness:
    """The liveness of each branch met, computed once per branch."""

    def __init__(self) -> None:
        self._known: dict[SeqExpr, Liveness] = {}

    def of(self, node: If, taken: bool) -> tuple[SeqExpr, Liveness]:
        """The branch `taken` picks and its liveness."""
        branch = node.true_branch if taken else node.false_branch
        live = self._known.get(branch)
        if live is None:
            live = self._known[branch] = liveness(Function((), branch, ObjectStructInfo()))
        return branch, live
