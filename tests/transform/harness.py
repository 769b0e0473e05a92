"""Checks shared by the pass tests: Before/Expected comparison with well-formedness and a
print/parse round trip, runs of the original and the lazy function on the VM compared bit for
bit, and the static invariants of a lazy function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lazyparams.analysis import used_vars, well_formed
from lazyparams.ir import (
    Binding,
    Call,
    DataflowBlock,
    ExternFunc,
    Function,
    IRModule,
    Op,
    TupleStructInfo,
    Var,
    assert_structural_equal,
    is_pure_call,
)
from lazyparams.runtime import VirtualMachine
from lazyparams.script import parse
from lazyparams.transform import Pass
from tests.programs import random_inputs

FUNC = "main_transform_params"
Arrays = tuple[np.ndarray[Any, Any], ...]


def assert_well_formed(mod: IRModule) -> None:
    """`well_formed`; the purity rule is relaxed only for seed-style lazy output, whose
    dataflow blocks hold impure extern calls."""
    seed_style = any(
        isinstance(block, DataflowBlock)
        and any(isinstance(b.value, Call) and not is_pure_call(b.value) for b in block.bindings)
        for _, func in mod.relax_functions()
        for block in func.body.blocks
    )
    well_formed(mod, check_purity=not seed_style)


def check_pass(pass_: Pass, before: IRModule, expected: IRModule) -> IRModule:
    """Run `pass_` on `before`: the result equals `expected`, is well formed, prints and parses
    back to itself, and `before` is left as it was."""
    text = before.script()
    after = pass_(before)
    assert before.script() == text, "the pass changed its input module"
    assert_structural_equal(after, expected, map_free_vars=True)
    assert_well_formed(after)
    assert_round_trip(after)
    return after


def assert_round_trip(mod: IRModule) -> None:
    """The printed module parses back to a structurally equal one."""
    assert_structural_equal(parse(mod.script()), mod, map_free_vars=True)


def same_bits(a: Any, b: Any) -> bool:
    """Whether two outputs are equal bit for bit (arrays: dtype, shape and bytes)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(same_bits(x, y) for x, y in zip(a, b, strict=True))
        )
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def weights_of(mod: IRModule, name: str = FUNC, seed: int = 0, runtime: int = 0) -> Arrays:
    """Random arrays for the weight params of `name` (the params after `runtime`)."""
    func = mod[name]
    assert isinstance(func, Function)
    weights = func.params[runtime:]
    probe = Function(weights, func.body, func.ret_struct_info)
    return random_inputs(probe, seed)


def run_eager(mod: IRModule, weights: Arrays, runtime: Sequence[Any] = (), name: str = FUNC) -> Any:
    """Run the original function on `runtime` inputs and the weights (a tuple param takes them
    as one tuple)."""
    func = mod[name]
    assert isinstance(func, Function)
    rest = func.params[len(runtime) :]
    vm = VirtualMachine(mod)
    if len(rest) == 1 and isinstance(rest[0].struct_info, TupleStructInfo):
        return vm[name](*runtime, tuple(weights))
    return vm[name](*runtime, *weights)


class Store:
    """In-memory `get_item` / `set_item` (also usable as `fget_param` / `fset_output`):
    records every load and refuses an output index set twice."""

    def __init__(self, weights: Arrays) -> None:
        self.weights = weights
        self.loads: list[int] = []
        self.names: list[str] = []
        self.outputs: dict[int, Any] = {}

    def get_item(self, *args: Any) -> Any:
        if isinstance(args[-1], str):
            self.names.append(args[-1])
            args = args[:-1]
        index = int(args[-1])
        assert index not in self.loads, f"weight {index} loaded twice"
        self.loads.append(index)
        return self.weights[index]

    def set_item(self, *args: Any) -> None:
        index, value = int(args[-2]), args[-1]
        assert index not in self.outputs, f"output {index} set twice"
        self.outputs[index] = value

    def output_tuple(self) -> tuple[Any, ...]:
        assert sorted(self.outputs) == list(range(len(self.outputs))), sorted(self.outputs)
        return tuple(self.outputs[i] for i in range(len(self.outputs)))


def run_lazy(
    mod: IRModule, weights: Arrays, args: Sequence[Any] = (), name: str = FUNC
) -> tuple[Store, Any]:
    """Run a seed-style lazy function with `get_item` / `set_item` over `weights`; `args` are
    its params. Returns the store and the function's result."""
    store = Store(weights)
    vm = VirtualMachine(mod, {"get_item": store.get_item, "set_item": store.set_item})
    return store, vm[name](*args)


def compare_lazy(
    before: IRModule,
    after: IRModule,
    runtime: Sequence[Any] = (),
    lazy_args: Sequence[Any] | None = None,
    *,
    returns: bool = False,
) -> Store:
    """The lazy function run through `get_item` / `set_item` gives the original outputs bit
    for bit (through `set_item`, or as its result when `returns`), loading each weight once.

    `runtime` are the original's runtime inputs; the lazy function takes `lazy_args` (by
    default the same).
    """
    weights = weights_of(before, runtime=len(runtime))
    expected = run_eager(before, weights, runtime)
    store, result = run_lazy(after, weights, runtime if lazy_args is None else lazy_args)
    got = result if returns else store.output_tuple()
    if not isinstance(expected, tuple) and not returns:
        expected = (expected,)
    assert same_bits(got, expected)
    return store


def check_kills(func: Function, must_kill: Callable[[Var], bool] = lambda v: False) -> None:
    """No var is used after its kill or killed twice; every var `must_kill` accepts is killed."""
    killed: set[Var] = set()
    for binding in func.bindings():
        used = used_vars(binding.value)
        late = [v.name_hint for v in used if v in killed]
        assert not late, f"{binding.var.name_hint} uses {late} after their kill"
        if is_kill(binding):
            assert used[0] not in killed, f"{used[0].name_hint} killed twice"
            killed.add(used[0])
    late = [v.name_hint for v in used_vars(func.body.body) if v in killed]
    assert not late, f"the result uses {late} after their kill"
    missing = [b.var.name_hint for b in func.bindings() if must_kill(b.var) and b.var not in killed]
    assert not missing, f"never killed: {missing}"


def is_kill(binding: Binding) -> bool:
    """Whether `binding` is `R.vm.kill_object(...)`."""
    value = binding.value
    return (
        isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == "vm.kill_object"
    )


def extern_calls(func: Function, name: str) -> list[Binding]:
    """The bindings calling extern `name` (directly or inside a match_cast)."""
    return [b for b in func.bindings() if _calls_extern(b.value, name)]


def _calls_extern(expr: Any, name: str) -> bool:
    return (
        isinstance(expr, Call) and isinstance(expr.op, ExternFunc) and expr.op.global_symbol == name
    )
