"""One-line text of Relax expressions and bindings, for error messages.

The text is the printer core's (`ir.print_expr`), in the messages' spelling: names as the user
wrote them, the dtype positional; only what a message must not print in full (a constant's
data) or what no script line holds (an op or an `If` in place of a value) is spelled here.
Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.errors import LazyParamsError
from lazyparams.ir.dtype import from_numpy
from lazyparams.ir.expr import Binding, Call, Constant, Expr, ExternFunc, If, Op
from lazyparams.ir.print_expr import ExprPrinter
from lazyparams.ir.print_prim import HintNames, quote
from lazyparams.ir.spelling import MESSAGE


class _Describer(ExprPrinter):
    """The printer core's expressions, with the few spellings only messages need."""

    def __init__(self) -> None:
        super().__init__(HintNames(), MESSAGE)

    def _leaf(self, expr: Expr) -> str:
        if isinstance(expr, Constant):  # the data may be megabytes: its shape says enough
            dtype = quote(from_numpy(expr.data.dtype))
            return f"R.const(<shape {list(expr.data.shape)}>, {dtype})"
        if isinstance(expr, Op):
            return f"R.{expr.name}"
        if isinstance(expr, If):
            then, other = self.expr(expr.true_branch.body), self.expr(expr.false_branch.body)
            return f"({then} if {self.expr(expr.cond)} else {other})"
        return super()._leaf(expr)

    def _op_parts(self, call: Call, args: list[str]) -> list[str]:
        """A call the printer would refuse (operands its op does not take) is still described,
        since describing it is often the point of the message."""
        try:
            return super()._op_parts(call, args)
        except LazyParamsError:
            return args + [f"{k}={v!r}" for k, v in call.attrs.items()]


def expr_text(expr: Expr) -> str:
    """`R.add(lv, lv1)`, `params[0]`, `(a, b)`: an expression in one line."""
    return _Describer().expr(expr)


def callee_text(op: Expr) -> str:
    """What a call calls: `R.permute_dims`, `cls.f`, `R.call_packed("get_item")`."""
    if isinstance(op, ExternFunc):
        return f"R.call_packed({quote(op.global_symbol)})"
    return expr_text(op)


def binding_text(binding: Binding) -> str:
    """`lv = R.add(a, b)` or `lv = R.match_cast(x, R.Tensor(...))`."""
    head, parts = _Describer().value_parts(binding)
    value = f"{head}({', '.join(parts)})" if head else parts[0]
    return f"{binding.var.name_hint} = {value}"


__all__ = ["binding_text", "callee_text", "expr_text"]
