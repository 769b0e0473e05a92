"""Properties of structural equality and hashing over random transform programs, and scale."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.ir import (
    BlockBuilder,
    IRModule,
    TensorStructInfo,
    TupleGetItem,
    TupleStructInfo,
    Var,
    structural_equal,
    structural_hash,
)
from tests.programs import SETTINGS, transform_programs

_VARS = {"Var", "DataflowVar", "PrimVar", "Buffer"}
_NAMES = {"name_hint", "name"}


class _Rebuild:
    """Copies a tree node by node, giving every var a fresh object with a new name.

    With `target` set, the scalar leaf at that position (in walk order) is changed instead of
    copied, so exactly one value differs from the original.
    """

    def __init__(self, target: int = -1) -> None:
        self.vars: dict[int, Any] = {}
        self.leaves = 0
        self.target = target

    def copy(self, value: Any) -> Any:
        if isinstance(value, IRModule):
            funcs = {name: self.copy(value[name]) for name in value.names()}
            return IRModule(funcs, self.copy(value.attrs))
        if isinstance(value, np.ndarray):
            return self.leaf(value)
        if isinstance(value, tuple | list):
            return type(value)(self.copy(v) for v in value)
        if isinstance(value, dict):
            return {k: self.copy(v) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self.node(value)
        return self.leaf(value)

    def node(self, value: Any) -> Any:
        is_var = type(value).__name__ in _VARS
        if is_var and id(value) in self.vars:
            return self.vars[id(value)]
        clone = object.__new__(type(value))  # no __post_init__: a changed dtype may be invalid
        if is_var:
            self.vars[id(value)] = clone
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            new = f"{item}_copy" if is_var and f.name in _NAMES else self.copy(item)
            object.__setattr__(clone, f.name, new)
        return clone

    def leaf(self, value: Any) -> Any:
        index, self.leaves = self.leaves, self.leaves + 1
        if index != self.target:
            return value.copy() if isinstance(value, np.ndarray) else value
        return _changed(value)


def _changed(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        changed = value.copy()
        changed.reshape(-1)[0] = changed.reshape(-1)[0] + 1 if changed.size else 0
        return changed if changed.size else np.zeros((1,), value.dtype)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    return 0 if value is None else None


@SETTINGS
@given(transform_programs())
def test_a_rebuilt_module_is_equal_and_hashes_alike(mod: IRModule) -> None:
    twin = _Rebuild().copy(mod)
    assert structural_equal(mod, twin)
    assert structural_equal(twin, mod)
    assert structural_hash(mod) == structural_hash(twin)


@SETTINGS
@given(transform_programs(), st.data())
def test_one_changed_value_makes_modules_unequal(mod: IRModule, data: st.DataObject) -> None:
    leaves = _Rebuild()
    leaves.copy(mod)
    target = data.draw(st.integers(0, leaves.leaves - 1), label="leaf")
    mutant = _Rebuild(target).copy(mod)
    assert not structural_equal(mod, mutant)
    assert not structural_equal(mutant, mod, map_free_vars=True)
    assert structural_hash(mod) != structural_hash(mutant)  # a 64-bit collision is negligible


@SETTINGS
@given(transform_programs(), transform_programs())
def test_equal_programs_always_hash_alike(a: IRModule, b: IRModule) -> None:
    if structural_equal(a, b):
        assert structural_hash(a) == structural_hash(b)
    assert structural_hash(a) == structural_hash(a)


def _long_chain(bindings: int) -> IRModule:
    sinfo = TensorStructInfo((4, 4), "float32")
    bb = BlockBuilder()
    params = Var("params", TupleStructInfo((sinfo,)))
    value = bb.emit(TupleGetItem(params, 0))
    with bb.dataflow():
        for _ in range(bindings):
            value = bb.emit(op.add(value, value))
        out = bb.emit_output(value)
    return IRModule({"main": bb.finish_function((params,), out)})


def test_ten_thousand_bindings_compare_and_hash_without_deep_recursion() -> None:
    a, b = _long_chain(10_000), _long_chain(10_000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # an implementation recursing per binding would fail here
    try:
        assert structural_equal(a, b)
        assert structural_hash(a) == structural_hash(b)
        assert not structural_equal(a, _long_chain(10_001))
    finally:
        sys.setrecursionlimit(limit)
