"""DeadCodeElimination: drop bindings whose value nobody reads and whose evaluation has no
effect, and functions no entry function reaches.

Impure calls (loads, hand-offs, kills, externs) always stay; a match_cast that mentions a
symbolic dim stays too, since it may define the dim for later struct info. Imports `ir` and
`analysis`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.analysis.liveness import used_vars
from lazyparams.errors import TransformError
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    Expr,
    ExprVisitor,
    Function,
    GlobalVar,
    If,
    IRModule,
    MatchCast,
    SeqExpr,
    Var,
    VarBinding,
    is_pure_call,
)
from lazyparams.transform.base import Pass
from lazyparams.transform.util import prim_vars


class DeadCodeElimination(Pass):
    """Remove dead pure bindings from every Relax function, then unreachable functions.

    The entry functions are `entry_functions` when given, else every Relax function; a
    function (a TIR kernel, say) that no entry function references directly or indirectly is
    dropped. A module without Relax functions and without given entries keeps its functions.
    """

    def __init__(self, entry_functions: Sequence[str] | None = None) -> None:
        if isinstance(entry_functions, str):
            raise TransformError(
                f"DeadCodeElimination: expected a list of function names, got {entry_functions!r}"
            )
        self.entry_functions = None if entry_functions is None else tuple(entry_functions)

    def transform_module(self, mod: IRModule) -> IRModule:
        result = mod
        for name, func in mod.relax_functions():
            new_func = _eliminate(func, mod)
            if new_func is not func:
                result = result.with_function(name, new_func)
        return self._drop_unreachable(result)

    def _drop_unreachable(self, mod: IRModule) -> IRModule:
        entries = self.entry_functions
        if entries is None:
            entries = tuple(name for name, _ in mod.relax_functions())
            if not entries:
                return mod
        for name in entries:
            if name not in mod:
                raise TransformError(
                    f"DeadCodeElimination: expected an entry function in {mod.names()}, "
                    f"got {name!r}"
                )
        reached = _reachable(mod, entries)
        for name in mod.names():
            if name not in reached:
                mod = mod.without_function(name)
        return mod


def _eliminate(func: Function, mod: IRModule) -> Function:
    """`func` without its dead pure bindings (itself when none is dead)."""
    body = _eliminate_seq(func.body, mod)
    if body is func.body:
        return func
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


def _eliminate_seq(seq: SeqExpr, mod: IRModule) -> SeqExpr:
    """`seq` without its dead pure bindings, If branches included (itself when none is dead)."""
    live = set(used_vars(seq.body))
    kept_blocks: list[BindingBlock] = []
    removed = False
    for block in reversed(seq.blocks):
        kept: list[Binding] = []
        for binding in reversed(block.bindings):
            if binding.var not in live and _removable(binding, mod):
                removed = True
                continue
            inner = _eliminate_if(binding, mod)
            removed = removed or inner is not binding
            kept.append(inner)
            live.update(used_vars(inner.value))
        if kept:
            kept_blocks.append(type(block)(tuple(reversed(kept))))
        else:
            removed = True
    if not removed:
        return seq
    return SeqExpr(tuple(reversed(kept_blocks)), seq.body)


def _eliminate_if(binding: Binding, mod: IRModule) -> Binding:
    """An If binding with the dead code of its branches removed (else `binding` itself)."""
    value = binding.value
    if not isinstance(value, If):
        return binding
    cleaned = value.with_branches(lambda branch: _eliminate_seq(branch, mod))
    return binding if cleaned is value else VarBinding(binding.var, cleaned)


def _removable(binding: Binding, mod: IRModule) -> bool:
    if isinstance(binding, MatchCast) and prim_vars(binding.struct_info):
        return False
    return _is_pure(binding.value, mod)


def _is_pure(expr: Expr, mod: IRModule) -> bool:
    """Whether evaluating `expr` has no effect; a call of a module function is as pure as it,
    an If as pure as every binding of its branches."""
    if isinstance(expr, If):
        branches = (expr.true_branch, expr.false_branch)
        return all(
            _removable(b, mod) for seq in branches for blk in seq.blocks for b in blk.bindings
        )
    if not isinstance(expr, Call):
        return True
    if isinstance(expr.op, GlobalVar) and expr.op.name_hint in mod:
        callee = mod[expr.op.name_hint]
        return isinstance(callee, Function) and callee.is_pure
    return is_pure_call(expr)


class _GlobalRefs(ExprVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_global_var_(self, gvar: GlobalVar) -> None:
        self.names.append(gvar.name_hint)

    def visit_var_(self, var: Var) -> None:
        """Uses of local vars do not reference functions."""


def _reachable(mod: IRModule, entries: Sequence[str]) -> set[str]:
    reached: set[str] = set()
    stack = list(entries)
    while stack:
        name = stack.pop()
        if name in reached or name not in mod:
            continue
        reached.add(name)
        func = mod[name]
        if isinstance(func, Function):
            refs = _GlobalRefs()
            refs.visit_expr(func)
            stack.extend(refs.names)
    return reached
