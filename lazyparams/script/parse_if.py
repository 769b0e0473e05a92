"""Parsing `if cond: ... else: ...` in a Relax function body into a binding `name = If(...)`.

Each branch must end by binding the same name; that last binding becomes the branch's result
(its value itself when it is a var, a constant or a tuple of such, else a var `name_then` /
`name_else` bound to it), and vars bound inside a branch stay inside it. Imports `ir` and the
script's parsing helpers.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from lazyparams.ir.expr import (
    Binding,
    BindingBlock,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    ExternFunc,
    GlobalVar,
    If,
    MatchCast,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    Var,
    VarBinding,
)
from lazyparams.ir.infer import struct_info_of

if TYPE_CHECKING:
    from lazyparams.script.parse_relax import FunctionParser

_LEAVES = (Var, Constant, PrimValue, ShapeExpr, StringImm, GlobalVar, ExternFunc, Op)


def parse_if(parser: FunctionParser, stmt: ast.If, outputs: set[str] | None) -> None:
    """Bind the If `stmt` spells to the name both its branches assign last."""
    src = parser.src
    if outputs is not None:
        raise src.error(
            stmt, "if: expected it outside with R.dataflow(): blocks, got one inside a block"
        )
    if not stmt.orelse:
        raise src.error(stmt, "if: expected an else: branch too (both branches bind the result)")
    cond = parser.expr(stmt.test)
    if not isinstance(cond, _LEAVES):
        # as TVM normalises it: a computed condition is bound to a var of its own first
        sinfo = parser.checked(stmt.test, lambda: struct_info_of(cond))
        bound = Var(_fresh_name(parser, "gv"), sinfo)
        parser.pending.append(VarBinding(bound, cond))
        cond = bound
    then_name, then_branch = _branch(parser, stmt, stmt.body, "then")
    else_name, else_branch = _branch(parser, stmt, stmt.orelse, "else")
    if then_name != else_name:
        raise src.error(
            stmt.orelse[-1],
            f"if: expected both branches to bind the same var last, got {then_name!r} in the if "
            f"branch and {else_name!r} in the else branch",
        )
    value = If(cond, then_branch, else_branch)
    var = Var(then_name, parser.checked(stmt, lambda: struct_info_of(value)))
    parser.vars[then_name] = var
    parser.hidden.pop(then_name, None)
    parser.pending.append(VarBinding(var, value))


def _branch(
    parser: FunctionParser, stmt: ast.If, body: list[ast.stmt], suffix: str
) -> tuple[str, SeqExpr]:
    """The name a branch binds last and the branch as a SeqExpr; its own vars are forgotten."""
    saved = parser.blocks, parser.pending, dict(parser.vars), dict(parser.hidden)
    parser.blocks, parser.pending = [], []
    try:
        for inner in body:
            parser._statement(inner)
        parser._flush()
        blocks = parser.blocks
    finally:
        parser.blocks, parser.pending, parser.vars, parser.hidden = saved
    last_block = blocks[-1] if blocks else None
    if last_block is None or isinstance(last_block.bindings[-1].var, DataflowVar):
        where = "if" if suffix == "then" else "else"
        raise parser.src.error(
            body[-1] if body else stmt,
            f"{where} branch: expected it to end by binding the if's result to a var "
            "(name = ...), got no such binding",
        )
    name = last_block.bindings[-1].var.name_hint
    return name, _as_seq(blocks, f"{name}_{suffix}")


def _as_seq(blocks: list[BindingBlock], result_name: str) -> SeqExpr:
    """The branch's blocks with the last binding turned into the result."""
    last_block = blocks[-1]
    last = last_block.bindings[-1]
    kept: list[Binding] = list(last_block.bindings[:-1])
    result: Expr
    if isinstance(last, VarBinding) and _is_leaf_or_tuple(last.value):
        result = last.value
    else:
        result = Var(result_name, last.var.struct_info)
        if isinstance(last, MatchCast):
            kept.append(MatchCast(result, last.value, last.struct_info))
        else:
            kept.append(VarBinding(result, last.value))
    kind = DataflowBlock if isinstance(last_block, DataflowBlock) else BindingBlock
    tail = [kind(tuple(kept))] if kept else []
    return SeqExpr((*blocks[:-1], *tail), result)


def _fresh_name(parser: FunctionParser, hint: str) -> str:
    """A name no var of the function visible here has (the printer keeps names unique)."""
    taken = set(parser.vars) | set(parser.hidden)
    name, count = hint, 0
    while name in taken:
        count += 1
        name = f"{hint}{count}"
    return name


def _is_leaf_or_tuple(expr: Expr) -> bool:
    if isinstance(expr, Tuple):
        return all(isinstance(f, _LEAVES) for f in expr.fields)
    return isinstance(expr, _LEAVES)
