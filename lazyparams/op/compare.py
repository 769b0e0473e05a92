"""Masks and selection: the comparisons, logical_and / logical_or of masks, and where.

Comparisons take two tensors of one dtype and give a "bool" tensor; the logical ops take and
give "bool" tensors; `R.where(condition, x1, x2)` picks from x1 where the bool condition holds
and from x2 elsewhere. All three operands broadcast as numpy's do. Imports `ir` and the op
layer's helpers.
"""

from __future__ import annotations

from collections.abc import Callable

from lazyparams.ir.expr import Call
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    call_op_name,
    op_function,
    register,
    require_dtype,
    same_dtype,
    tensor_operand,
)
from lazyparams.op.binary import broadcast_struct, operand_pair

COMPARISONS: dict[str, str] = {
    "greater": "x1 > x2",
    "greater_equal": "x1 >= x2",
    "less": "x1 < x2",
    "less_equal": "x1 <= x2",
    "equal": "x1 == x2",
    "not_equal": "x1 != x2",
}
"""The comparison ops by script name, and what each tests (numpy's: NaN compares unequal)."""

LOGICAL: dict[str, str] = {"logical_and": "x1 and x2", "logical_or": "x1 or x2"}
"""The logical ops of bool tensors by script name."""


def _infer_comparison(call: Call) -> TensorStructInfo:
    """A bool mask in the broadcast shape of two operands of one dtype."""
    name = call_op_name(call)
    a, b = operand_pair(call)
    same_dtype(name, [a.dtype, b.dtype])
    return broadcast_struct(name, (a, b), "bool")


def _infer_logical(call: Call) -> TensorStructInfo:
    """A bool mask in the broadcast shape of two bool operands."""
    name = call_op_name(call)
    a, b = operand_pair(call)
    require_dtype(name, a, "bool", "x1")
    require_dtype(name, b, "bool", "x2")
    return broadcast_struct(name, (a, b), "bool")


def _infer_where(call: Call) -> TensorStructInfo:
    """x1's and x2's common dtype, in the broadcast shape of all three operands."""
    condition = tensor_operand(call, 0, "condition")
    a, b = tensor_operand(call, 1, "x1"), tensor_operand(call, 2, "x2")
    require_dtype("where", condition, "bool", "condition")
    dtype = same_dtype("where", [a.dtype, b.dtype], "x1 and x2")
    return broadcast_struct("where", (condition, a, b), dtype)


def _constructor(name: str) -> Callable[..., Call]:
    what = (COMPARISONS | LOGICAL)[name]
    return op_function(name, f"`R.{name}(x1, x2)`: the bool mask of {what}, numpy-broadcast.")


# one constructor per op, in the tables' order
greater, greater_equal, less, less_equal, equal, not_equal = map(_constructor, COMPARISONS)
logical_and, logical_or = map(_constructor, LOGICAL)
where = op_function(
    "where",
    "`R.where(condition, x1, x2)`: x1 where the bool condition holds, else x2; the three "
    "broadcast together and x1, x2 share the result's dtype.",
)

_PAIR = (OpParam("x1", "expr"), OpParam("x2", "expr"))

register(
    *(OpDef(name, _PAIR, _infer_comparison) for name in COMPARISONS),
    *(OpDef(name, _PAIR, _infer_logical) for name in LOGICAL),
    OpDef("where", (OpParam("condition", "expr"), *_PAIR), _infer_where),
)
