"""Copies of a Relax function with fresh symbolic vars, for passes that split one function in two.

Symbolic vars (PrimVar) belong to the function that binds them: two functions made from one
must not share them, or each would bind the other's dims (and a printed module would not parse
back to itself). `with_fresh_prim_vars` rebuilds every node that mentions one, keeping the
identity of Relax vars consistent (one new Var per old Var); `substitute_prim_vars` does the
same for any mapping (a dim bound to its value, say). Imports the IR's own modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from lazyparams.ir.expr import Function
from lazyparams.ir.prim import PrimExpr, PrimVar
from lazyparams.ir.structural_walk import is_array


def with_fresh_prim_vars(func: Function) -> Function:
    """`func` with each symbolic var it mentions replaced by a new one of the same name."""
    found: dict[PrimVar, None] = {}
    _collect(func, found, set())
    if not found:
        return func
    return substitute_prim_vars(func, {var: PrimVar(var.name, var.var_dtype) for var in found})


def substitute_prim_vars(func: Function, mapping: Mapping[PrimVar, PrimExpr]) -> Function:
    """`func` with the symbolic vars in `mapping` replaced (by new vars, or by values)."""
    if not mapping:
        return func
    result = _Substituter(mapping).visit(func)
    assert isinstance(result, Function)
    return result


def _collect(node: Any, found: dict[PrimVar, None], seen: set[int]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, PrimVar):
            found[item] = None
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(getattr(item, f.name) for f in reversed(dataclasses.fields(item)))


class _Substituter:
    """Rebuilds nodes bottom-up; memoised by identity so a shared node maps to one copy."""

    def __init__(self, mapping: Mapping[PrimVar, PrimExpr]) -> None:
        self.mapping = mapping
        self.memo: dict[int, Any] = {}

    def visit(self, node: Any) -> Any:
        if isinstance(node, PrimVar):
            return self.mapping.get(node, node)
        if isinstance(node, (str, int, float, bool)) or node is None or is_array(node):
            return node
        if isinstance(node, tuple):
            items = tuple(self.visit(i) for i in node)
            return node if all(a is b for a, b in zip(items, node, strict=True)) else items
        if isinstance(node, list):
            return [self.visit(i) for i in node]
        if isinstance(node, dict):
            return {k: self.visit(v) for k, v in node.items()}
        if not dataclasses.is_dataclass(node) or isinstance(node, type):
            return node
        key = id(node)
        if key not in self.memo:
            self.memo[key] = self._rebuild(node)
        return self.memo[key]

    def _rebuild(self, node: Any) -> Any:
        changed = {}
        for field in dataclasses.fields(node):
            if not field.init:
                continue
            old = getattr(node, field.name)
            new = self.visit(old)
            if new is not old:
                changed[field.name] = new
        return dataclasses.replace(node, **changed) if changed else node
