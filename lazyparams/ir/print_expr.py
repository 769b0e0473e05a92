"""Printing Relax expressions: calls, tuples, constants and the value of a binding.

`ExprPrinter` is the printer core's spelling of expressions: the Relax function printer builds
on it, and error messages describe bindings with it (`analysis.describe`). Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.errors import LazyParamsError
from lazyparams.ir.describe import sinfo_text
from lazyparams.ir.dtype import from_numpy
from lazyparams.ir.expr import (
    Binding,
    Call,
    Constant,
    Expr,
    ExternFunc,
    GlobalVar,
    MatchCast,
    Op,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.op_registry import SINFO_ARG_KEYWORDS, op_info
from lazyparams.ir.print_prim import Names, PrimPrinter, quote, tuple_text
from lazyparams.ir.print_text import const_text, value_text
from lazyparams.ir.spelling import Spelling
from lazyparams.ir.struct_info import ObjectStructInfo, StructInfo


class ExprPrinter:
    """Spells Relax expressions; names of vars and dims come from `names`."""

    def __init__(self, names: Names, spelling: Spelling) -> None:
        self.names, self.spelling = names, spelling
        self.prim = PrimPrinter(names)

    def body_sinfo(self, sinfo: StructInfo | None) -> str:
        """Struct info inside the body, where symbolic dims are declared names."""
        return sinfo_text(sinfo or ObjectStructInfo(), self.prim, self.spelling)

    def value_parts(self, binding: Binding) -> tuple[str, list[str]]:
        """A binding's value as (callee, argument texts), or ("", [text]) when not a call."""
        value = binding.value
        if isinstance(binding, MatchCast):
            return "R.match_cast", [self.expr(value), self.body_sinfo(binding.struct_info)]
        if isinstance(value, Call):
            return self._call(value)
        return "", [self.expr(value)]

    def expr(self, expr: Expr) -> str:
        """The spelling of a Relax expression."""
        if isinstance(expr, Var):
            return self.names[expr]
        if isinstance(expr, GlobalVar):
            return f"cls.{expr.name_hint}"
        if isinstance(expr, Tuple):
            return tuple_text([self.expr(f) for f in expr.fields])
        if isinstance(expr, TupleGetItem):
            return f"{self.expr(expr.tuple_value)}[{expr.index}]"
        if isinstance(expr, Call):
            head, parts = self._call(expr)
            return f"{head}({', '.join(parts)})"
        return self._leaf(expr)

    def _leaf(self, expr: Expr) -> str:
        if isinstance(expr, Constant):
            return const_text(expr.data, from_numpy(expr.data.dtype))
        if isinstance(expr, PrimValue):
            return f"R.prim_value({self.prim(expr.value)})"
        if isinstance(expr, StringImm):
            return f"R.str({quote(expr.value)})"
        if isinstance(expr, ShapeExpr):
            return f"R.shape([{', '.join(self.prim(v) for v in expr.values)}])"
        if isinstance(expr, ExternFunc):
            return f"R.ExternFunc({quote(expr.global_symbol)})"
        raise LazyParamsError(
            f"cannot print {type(expr).__name__} as a script expression; expected a node of ir.expr"
        )

    def _call(self, call: Call) -> tuple[str, list[str]]:
        """The callee spelling and the argument texts of a call."""
        args = [self.expr(a) for a in call.args]
        sinfo_tuple = tuple_text([self.body_sinfo(s) for s in call.sinfo_args])
        pure_extern = isinstance(call.op, Op) and call.op.name == "call_pure_packed"
        if pure_extern and call.args and isinstance(call.args[0], ExternFunc):
            operands = args[1:]
            return "R.call_pure_packed", [
                quote(call.args[0].global_symbol),
                *operands,
                f"{self.spelling.sinfo_args}={sinfo_tuple}",
            ]
        if isinstance(call.op, Op) and call.op.name == "assert_op":
            return "R.assert_op", self._assert_parts(call)
        if isinstance(call.op, Op):
            return f"R.{call.op.name}", self._op_parts(call, args)
        if isinstance(call.op, ExternFunc):
            return "R.call_packed", [
                quote(call.op.global_symbol),
                *args,
                f"{self.spelling.sinfo_args}={sinfo_tuple}",
            ]
        if not isinstance(call.op, Var | GlobalVar):
            raise LazyParamsError(
                f"cannot print a call of {type(call.op).__name__}; "
                "expected an op, extern, var or cls.f"
            )
        if call.sinfo_args:
            args.append(f"{self.spelling.sinfo_args}={sinfo_tuple}")
        return self.expr(call.op), args

    def _assert_parts(self, call: Call) -> list[str]:
        """`R.assert_op(condition, [values], format="...")`: the message's values as a list, as
        both parsers read them."""
        parts = [self.expr(call.args[0])]
        values = call.args[1] if len(call.args) > 1 else None
        if isinstance(values, Tuple) and values.fields:
            parts.append(f"[{', '.join(self.expr(v) for v in values.fields)}]")
        if call.attrs.get("format"):
            parts.append(f"format={quote(str(call.attrs['format']))}")
        return parts

    def _op_parts(self, call: Call, args: list[str]) -> list[str]:
        """Arguments of `R.<op>(...)`: leading operands by position, the rest by keyword."""
        assert isinstance(call.op, Op)
        params = op_info(call.op).params
        expr_params = [p.name for p in params if p.kind == "expr"]
        required = sum(1 for p in params if p.kind == "expr" and p.required)
        if not required <= len(args) <= len(expr_params):
            raise LazyParamsError(
                f"cannot print R.{call.op.name} with {len(args)} operands; "
                f"expected {required} to {len(expr_params)}"
            )
        if len(args) > required and not self.spelling.tir_vars:
            raise LazyParamsError(
                f"cannot print R.{call.op.name} with {expr_params[len(args) - 1]}= in TVM 0.27's "
                "spelling, which has none; expected the ints as R.prim_value operands"
            )
        expr_params = expr_params[: len(args)]
        texts = dict(zip(expr_params, args, strict=True))
        texts |= {k: value_text(v, self.prim, lists=True) for k, v in call.attrs.items()}
        parts: list[str] = []
        for p in params:
            if p.kind == "expr" and p.required and len(parts) == params.index(p):
                parts.append(texts.pop(p.name))
        parts += [f"{k}={v}" for k, v in texts.items()]
        if call.sinfo_args:
            parts.append(self._sinfo_keyword(call))
        return parts

    def _sinfo_keyword(self, call: Call) -> str:
        assert isinstance(call.op, Op)
        keyword = SINFO_ARG_KEYWORDS.get(call.op.name, "sinfo_args")
        keyword = self.spelling.out_sinfo if keyword == "out_sinfo" else self.spelling.sinfo_args
        texts = [self.body_sinfo(s) for s in call.sinfo_args]
        if len(texts) == 1:
            return f"{keyword}={texts[0]}"
        return f"{keyword}=[{', '.join(texts)}]"
