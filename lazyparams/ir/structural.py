"""Structural equality and hashing of IR: modules, Relax and TIR nodes, struct info, prim exprs.

Trees are equal when they have the same shape and values and their variables are bound at
corresponding definition points; name hints do not matter. The walk is generic over the frozen
dataclass fields (`ir.structural_walk`) and uses an explicit stack so that long functions need
no deep recursion. Imports numpy and the other `ir` modules only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lazyparams.ir.expr import Function
from lazyparams.ir.module import IRModule
from lazyparams.ir.structural_walk import (
    ARRAY,
    MAPPING,
    MODULE,
    NODE,
    SCALAR,
    SEQUENCE,
    USE,
    NodePlan,
    Path,
    array_bytes,
    array_key,
    child_ctx,
    field_value,
    kind_of,
    leaf_key,
    node_plan,
    scalar_key,
    var_fields_ctx,
)

if TYPE_CHECKING:
    import numpy as np

# Equality ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first difference found: where it is, why, and the two values there."""

    path: str
    reason: str
    lhs: Any
    rhs: Any


_Item = tuple[Any, Any, Path, int]


class _Comparer:
    """Walks two trees in lockstep, binding vars 1:1 at definition points."""

    def __init__(self, map_free_vars: bool, root: str) -> None:
        self.map_free_vars = map_free_vars
        self.root = root
        self.lhs_map: dict[Any, Any] = {}
        self.rhs_map: dict[Any, Any] = {}
        self.stack: list[_Item] = []

    def run(self, lhs: Any, rhs: Any) -> Mismatch | None:
        self.stack.append((lhs, rhs, None, USE))
        while self.stack:
            a, b, path, ctx = self.stack.pop()
            reason = self._step(a, b, path, ctx)
            if reason is not None:
                return Mismatch(render_path(self.root, path), reason, a, b)
        return None

    def _step(self, a: Any, b: Any, path: Path, ctx: int) -> str | None:
        kind, kind_b = kind_of(type(a)), kind_of(type(b))
        if kind == SCALAR or kind_b == SCALAR:
            if a is b or (kind == kind_b and leaf_key(a) == leaf_key(b)):
                return None
            return f"values differ: {_kind(a)} {_brief(a, 80)} vs {_kind(b)} {_brief(b, 80)}"
        if kind != kind_b or (kind == NODE and type(a) is not type(b)):
            return f"node types differ: {_kind(a)} vs {_kind(b)}"
        if kind == SEQUENCE:
            return self._sequence(a, b, path, ctx)
        if kind == MAPPING:
            return self._mapping(a, b, path, ctx)
        if kind == ARRAY:
            return _compare_arrays(a, b)
        if kind == MODULE:
            return self._module(a, b, path)
        plan = node_plan(type(a))
        if plan.is_var:
            return self._var(a, b, path, ctx, plan)
        self._push_fields(a, b, path, ctx, plan, None)
        return None

    def _sequence(self, a: Any, b: Any, path: Path, ctx: int) -> str | None:
        if len(a) != len(b):
            return f"lengths differ: {len(a)} vs {len(b)}"
        self.stack.extend((a[i], b[i], (path, i), ctx) for i in reversed(range(len(a))))
        return None

    def _mapping(
        self, a: Mapping[Any, Any], b: Mapping[Any, Any], path: Path, ctx: int
    ) -> str | None:
        if set(a) != set(b):
            only_a, only_b = sorted(set(a) - set(b), key=repr), sorted(set(b) - set(a), key=repr)
            return f"keys differ: lhs only {only_a}, rhs only {only_b}"
        keys = sorted(a, key=repr)
        self.stack.extend((a[k], b[k], (path, (k,)), ctx) for k in reversed(keys))
        return None

    def _module(self, a: IRModule, b: IRModule, path: Path) -> str | None:
        if set(a.names()) != set(b.names()):
            return f"function names differ: {sorted(a.names())} vs {sorted(b.names())}"
        for name in sorted(a.names(), reverse=True):
            self.stack.append((a[name], b[name], (path, (name,)), USE))
        self.stack.append((a.attrs, b.attrs, (path, "attrs"), USE))
        return None

    def _var(self, a: Any, b: Any, path: Path, ctx: int, plan: NodePlan) -> str | None:
        bound_a, bound_b = self.lhs_map.get(a), self.rhs_map.get(b)
        if bound_a is not None or bound_b is not None:
            if bound_a is b and bound_b is a:
                return None
            return (
                f"{_var_text(a)} is bound to {_var_text(bound_a)}, "
                f"but {_var_text(b)} is bound to {_var_text(bound_b)}"
            )
        if ctx == USE and not self.map_free_vars and a is not b:
            return (
                f"free vars differ: {_var_text(a)} vs {_var_text(b)} (a var not defined in the "
                "compared code equals only itself unless map_free_vars=True)"
            )
        self.lhs_map[a], self.rhs_map[b] = b, a
        self._push_fields(a, b, path, var_fields_ctx(ctx), plan, var_fields_ctx(ctx))
        return None

    def _push_fields(
        self, a: Any, b: Any, path: Path, ctx: int, plan: NodePlan, fixed: int | None
    ) -> None:
        """Queue the field pairs so they are visited in declaration order."""
        for name, own in reversed(plan.fields):
            inner = fixed if fixed is not None else child_ctx(own, ctx)
            self.stack.append((field_value(a, name), field_value(b, name), (path, name), inner))


def _compare_arrays(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> str | None:
    if array_key(a) != array_key(b):
        return f"constants differ: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    if array_bytes(a) != array_bytes(b):
        return "constant data differs"
    return None


def _kind(value: Any) -> str:
    return type(value).__name__


def _var_text(var: Any) -> str:
    if var is None:
        return "nothing"
    name = getattr(var, "name_hint", None) or getattr(var, "name", "?")
    return f"{type(var).__name__} {name!r}"


def render_path(root: str, path: Path) -> str:
    """Text of a path such as `Module["main"].body.blocks[0].bindings[2].value.args[1]`."""
    steps: list[str] = []
    while path is not None:
        path, step = path
        if isinstance(step, str):
            steps.append(f".{step}")
        elif isinstance(step, int):
            steps.append(f"[{step}]")
        else:
            key = step[0]
            steps.append(f'["{key}"]' if isinstance(key, str) else f"[{key!r}]")
    return root + "".join(reversed(steps))


def _root_name(value: Any) -> str:
    return "Module" if isinstance(value, IRModule) else type(value).__name__


def first_mismatch(lhs: Any, rhs: Any, map_free_vars: bool = False) -> Mismatch | None:
    """The first structural difference between `lhs` and `rhs`, or None when they are equal."""
    return _Comparer(map_free_vars, _root_name(lhs)).run(lhs, rhs)


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    """Whether two IR trees are equal up to the renaming of vars bound at matching points.

    Modules match functions by name. Var names do not matter, their struct info does; Var and
    DataflowVar differ; GlobalVars and Ops compare by name, constants by dtype, shape and bytes.
    A var used but not defined in the compared trees is equal only to itself unless
    `map_free_vars`, which maps it 1:1 to its counterpart.
    """
    return first_mismatch(lhs, rhs, map_free_vars) is None


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """Raise `AssertionError` naming the first differing path and printing both sides."""
    mismatch = first_mismatch(lhs, rhs, map_free_vars)
    if mismatch is None:
        return
    raise AssertionError(
        f"structural mismatch at {mismatch.path}: {mismatch.reason}\n"
        f"  lhs there: {_brief(mismatch.lhs)}\n  rhs there: {_brief(mismatch.rhs)}\n"
        f"--- lhs ---\n{_show(lhs)}\n--- rhs ---\n{_show(rhs)}"
    )


def _brief(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _show(value: Any) -> str:
    """Script text of a module or function, or its repr where the printer rejects it."""
    module: IRModule | None = None
    if isinstance(value, IRModule):
        module = value
    elif isinstance(value, Function):
        module = IRModule({str(value.attrs.get("global_symbol", "main")): value})
    if module is not None:
        try:
            return module.script()
        except Exception:  # the printer may be absent or reject broken IR: a repr still helps
            return "\n".join(f"{name}: {_brief(f, 20_000)}" for name, f in module.items())
    return _brief(value, 20_000)


# Hashing -------------------------------------------------------------------------------------


class _Hasher:
    """Walks one tree in the comparer's order, emitting tokens; vars by first-occurrence index."""

    def __init__(self) -> None:
        self.tokens: list[Any] = []
        self.var_index: dict[Any, int] = {}
        self.arrays: dict[int, str] = {}  # digest by id: a constant shared by many nodes

    def run(self, root: Any) -> int:
        stack: list[Any] = [root]
        while stack:
            self._step(stack.pop(), stack)
        import hashlib  # here: comparing and planning need no hashes

        digest = hashlib.blake2b(repr(self.tokens).encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little")

    def _step(self, node: Any, stack: list[Any]) -> None:
        tokens, kind = self.tokens, kind_of(type(node))
        if kind == SCALAR:
            tokens.append(leaf_key(node))
        elif kind == SEQUENCE:
            tokens.append(("seq", len(node)))
            stack.extend(reversed(node))
        elif kind == MAPPING:
            keys = sorted(node, key=repr)
            tokens.append(("map", tuple(scalar_key(k) for k in keys)))
            stack.extend(node[k] for k in reversed(keys))
        elif kind == ARRAY:
            tokens.append(("array", array_key(node), self._array_digest(node)))
        elif kind == MODULE:
            names = sorted(node.names())
            tokens.append(("module", tuple(names)))
            stack.extend(node[n] for n in reversed(names))
            stack.append(node.attrs)
        else:
            self._node(node, stack)

    def _array_digest(self, array: Any) -> str:
        """The digest of an array's bytes, computed once per array object of this walk (the
        walk holds every node, so no id is reused while it runs)."""
        found = self.arrays.get(id(array))
        if found is None:
            import hashlib

            found = hashlib.blake2b(array_bytes(array), digest_size=16).hexdigest()
            self.arrays[id(array)] = found
        return found

    def _node(self, node: Any, stack: list[Any]) -> None:
        plan = node_plan(type(node))
        if plan.is_var:
            index = self.var_index.get(node)
            if index is not None:
                self.tokens.append(("ref", index))
                return
            self.var_index[node] = len(self.var_index)
        self.tokens.append(("node", type(node).__name__))
        stack.extend(field_value(node, name) for name, _ in reversed(plan.fields))


def structural_hash(value: Any) -> int:
    """A 64-bit hash consistent with `structural_equal` (under either `map_free_vars`).

    Vars hash by the position of their first occurrence, so renamed but equal trees agree; the
    value is stable across processes.
    """
    return _Hasher().run(value)


__all__ = [
    "Mismatch",
    "assert_structural_equal",
    "first_mismatch",
    "render_path",
    "structural_equal",
    "structural_hash",
]
