"""Parsing the header of a `with T.block(...):`: iterators, `T.reads`, `T.writes`, `T.init`.

Split from the TIR parser, which hands each statement of a block here first; what is not a
header statement is the block's body. Imports `ir`, `tir` and the script's parsing helpers.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Literal

from lazyparams.ir.prim import PrimExpr, PrimVar
from lazyparams.script.source import bind_call, show
from lazyparams.tir.nodes import BufferRegion, IterVar, Stmt

if TYPE_CHECKING:
    from lazyparams.script.parse_tir import TirParser

_AXES: dict[str, Literal["S", "R"]] = {
    "T.axis.spatial": "S",
    "T.axis.S": "S",
    "T.axis.reduce": "R",
    "T.axis.R": "R",
}


class BlockParts:
    """Collects a block's header; `take(stmt)` says whether `stmt` was a header statement."""

    def __init__(self, parser: TirParser) -> None:
        self.parser = parser
        self.src = parser.src
        self.iter_vars: list[IterVar] = []
        self.reads: tuple[BufferRegion, ...] | None = None  # None: not written, inferred
        self.writes: tuple[BufferRegion, ...] | None = None
        self.init: Stmt | None = None

    def take(self, stmt: ast.stmt) -> bool:
        """Absorb `stmt` if it is an iterator, region or init statement."""
        if isinstance(stmt, ast.Assign) and (self.src.callee(stmt.value) or "").startswith(
            "T.axis."
        ):
            self._axes(stmt)
            return True
        if isinstance(stmt, ast.Expr) and self.src.callee(stmt.value) in ("T.reads", "T.writes"):
            assert isinstance(stmt.value, ast.Call)
            regions = self._regions(stmt.value)
            if self.src.callee(stmt.value) == "T.reads":
                self.reads = regions
            else:
                self.writes = regions
            return True
        if isinstance(stmt, ast.With) and self.src.callee(stmt.items[0].context_expr) == "T.init":
            if self.init is not None:
                raise self.src.error(stmt, "expected one with T.init(): per block, got a second")
            self.init = self.parser.stmts(stmt.body)
            return True
        return False

    def _regions(self, call: ast.Call) -> tuple[BufferRegion, ...]:
        if call.keywords:
            raise self.src.error(call.keywords[0], "expected buffer regions only, got a keyword")
        nodes = call.args
        if len(nodes) == 1 and isinstance(nodes[0], ast.List | ast.Tuple):
            nodes = nodes[0].elts
        return tuple(self.parser.region(n) for n in nodes)

    def _axes(self, stmt: ast.Assign) -> None:
        """`vi = T.axis.spatial(16, i)` or `vi, vj = T.axis.remap("SS", [i, j])`."""
        call = stmt.value
        assert isinstance(call, ast.Call)
        name = self.src.callee(call) or ""
        target = stmt.targets[0]
        targets = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(stmt.targets) != 1 or not all(isinstance(t, ast.Name) for t in targets):
            raise self.src.error(
                stmt, f"expected block iterator names on the left, got {show(stmt)}"
            )
        if name == "T.axis.remap":
            made = self._remap(call, len(targets))
        elif name in _AXES:
            if len(targets) != 1:
                raise self.src.error(
                    target, f"{name}: expected one iterator name, got {show(target)}"
                )
            made = [self._axis(call, name)]
        else:
            expected = "T.axis.remap, T.axis.spatial or T.axis.reduce"
            raise self.src.error(call.func, f"expected {expected}, got {name}")
        for t, (extent, kind, value) in zip(targets, made, strict=True):
            assert isinstance(t, ast.Name)
            var = self.parser.scopes[-1][t.id] = PrimVar(t.id, value.dtype)
            self.iter_vars.append(IterVar(var, extent, kind, value))

    def _remap(
        self, call: ast.Call, count: int
    ) -> list[tuple[PrimExpr, Literal["S", "R"], PrimExpr]]:
        params = ["kinds", "bindings"]
        args = bind_call(self.src, call, params, required=params, what="T.axis.remap")
        kinds, values = args["kinds"], args["bindings"]
        if not (
            isinstance(kinds, ast.Constant)
            and isinstance(kinds.value, str)
            and set(kinds.value) <= {"S", "R"}
        ):
            raise self.src.error(
                kinds,
                f'T.axis.remap: expected a string of S and R such as "SSR", got {show(kinds)}',
            )
        if not isinstance(values, ast.List | ast.Tuple):
            raise self.src.error(
                values, f"T.axis.remap: expected a list of loop variables, got {show(values)}"
            )
        if not len(kinds.value) == len(values.elts) == count:
            raise self.src.error(
                call,
                f"T.axis.remap: expected {count} kinds and {count} loop variables, "
                f"got {len(kinds.value)} and {len(values.elts)}",
            )
        made: list[tuple[PrimExpr, Literal["S", "R"], PrimExpr]] = []
        for kind, node in zip(kinds.value, values.elts, strict=True):
            value = self.parser.expr(node)
            if not isinstance(value, PrimVar) or value not in self.parser.extents:
                raise self.src.error(
                    node, f"T.axis.remap: expected a loop variable, got {show(node)}"
                )
            made.append((self.parser.extents[value], _kind(kind), value))
        return made

    def _axis(self, call: ast.Call, name: str) -> tuple[PrimExpr, Literal["S", "R"], PrimExpr]:
        args = bind_call(self.src, call, ["dom", "binding"], required=["dom", "binding"], what=name)
        return self.parser.expr(args["dom"]), _AXES[name], self.parser.expr(args["binding"])


def _kind(letter: str) -> Literal["S", "R"]:
    return "S" if letter == "S" else "R"
