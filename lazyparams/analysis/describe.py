"""One-line script-like text of Relax expressions and bindings, for error messages.

Errors name the binding they are about in the spelling of printed scripts without needing the
full printer (which sits above this layer). Imports `ir` and `op`.
"""

from __future__ import annotations

from typing import Any

from lazyparams.ir.describe import describe, show_dim
from lazyparams.ir.expr import (
    Binding,
    Call,
    Constant,
    Expr,
    ExternFunc,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.op_registry import SINFO_ARG_KEYWORDS
from lazyparams.ir.prim import PrimExpr


def expr_text(expr: Expr) -> str:
    """`R.add(lv, lv1)`, `params[0]`, `(a, b)`: an expression in one line."""
    if isinstance(expr, Var):
        return expr.name_hint
    if isinstance(expr, Call):
        return _call_text(expr)
    if isinstance(expr, Tuple):
        items = ", ".join(expr_text(f) for f in expr.fields)
        return f"({items},)" if len(expr.fields) == 1 else f"({items})"
    if isinstance(expr, TupleGetItem):
        return f"{expr_text(expr.tuple_value)}[{expr.index}]"
    if isinstance(expr, Constant):
        return f'R.const(<shape {list(expr.data.shape)}>, "{expr.data.dtype}")'
    if isinstance(expr, PrimValue):
        return f"R.prim_value({show_dim(expr.value)})"
    if isinstance(expr, StringImm):
        return f'R.str("{expr.value}")'
    if isinstance(expr, ShapeExpr):
        return f"R.shape([{', '.join(show_dim(v) for v in expr.values)}])"
    if isinstance(expr, GlobalVar | Op | ExternFunc):
        return callee_text(expr)
    if isinstance(expr, If):
        then, other = expr_text(expr.true_branch.body), expr_text(expr.false_branch.body)
        return f"({then} if {expr_text(expr.cond)} else {other})"
    return f"<{type(expr).__name__}>"


def callee_text(op: Expr) -> str:
    """What a call calls: `R.permute_dims`, `cls.f`, `R.call_packed("get_item")`."""
    if isinstance(op, GlobalVar):
        return f"cls.{op.name_hint}"
    if isinstance(op, Op):
        return f"R.{op.name}"
    if isinstance(op, ExternFunc):
        return f'R.call_packed("{op.global_symbol}")'
    return expr_text(op)


def binding_text(binding: Binding) -> str:
    """`lv = R.add(a, b)` or `lv = R.match_cast(x, R.Tensor(...))`."""
    value = expr_text(binding.value)
    if isinstance(binding, MatchCast):
        value = f"R.match_cast({value}, {describe(binding.struct_info)})"
    return f"{binding.var.name_hint} = {value}"


def _call_text(call: Call) -> str:
    args = [expr_text(a) for a in call.args]
    args += [f"{k}={_attr_text(v)}" for k, v in call.attrs.items()]
    if call.sinfo_args:
        args.append(_sinfo_args_text(call))
    if isinstance(call.op, ExternFunc):
        return f'R.call_packed("{call.op.global_symbol}"{"".join(", " + a for a in args)})'
    return f"{callee_text(call.op)}({', '.join(args)})"


def _sinfo_args_text(call: Call) -> str:
    """`sinfo_args=(R.Object,)`, or `out_sinfo=...` for the ops that spell it so (call_tir)."""
    texts = [describe(s) for s in call.sinfo_args]
    keyword = SINFO_ARG_KEYWORDS.get(call.op.name) if isinstance(call.op, Op) else None
    if keyword is None:
        return f"sinfo_args=({', '.join(texts)},)"
    return f"{keyword}={texts[0]}" if len(texts) == 1 else f"{keyword}=[{', '.join(texts)}]"


def _attr_text(value: Any) -> str:
    if isinstance(value, PrimExpr):
        return show_dim(value)
    if isinstance(value, tuple | list):
        return f"[{', '.join(_attr_text(v) for v in value)}]"
    return repr(value)


__all__ = ["binding_text", "callee_text", "expr_text"]
