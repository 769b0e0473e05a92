"""Unary elementwise math: abs, sign, sqrt, sin, cos, acos, exp, log, negative, square.

Each keeps its operand's shape and dtype and takes float tensors only: the kernels compute in
that dtype as numpy does, which for an integer tensor would mean another result dtype (sqrt)
or wrapping (abs of the most negative int). Imports `ir` and the op layer's helpers.
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
    require_float,
    tensor_operand,
)

UNARY: dict[str, str] = {
    "abs": "absolute value",
    "sign": "sign: -1, 0 or 1 (a NaN stays NaN)",
    "sqrt": "square root (NaN below zero)",
    "sin": "sine",
    "cos": "cosine",
    "acos": "arc cosine (NaN outside [-1, 1])",
    "exp": "exponential",
    "log": "natural logarithm (-inf at zero, NaN below)",
    "negative": "negation (the sign of zero flips)",
    "square": "x * x",
}
"""The unary ops by script name (`R.acos` is numpy's `arccos`), and what each computes."""


def _infer_unary(call: Call) -> TensorStructInfo:
    """The operand's own shape and dtype, which must be a float one."""
    x = tensor_operand(call, 0)
    require_float(call_op_name(call), x)
    return x


def _constructor(name: str) -> Callable[..., Call]:
    return op_function(name, f"`R.{name}(x)`: elementwise {UNARY[name]}, in x's float dtype.")


# one constructor per op, in UNARY's order
abs, sign, sqrt, sin, cos, acos, exp, log, negative, square = map(_constructor, UNARY)

register(*(OpDef(name, (OpParam("x", "expr"),), _infer_unary) for name in UNARY))
