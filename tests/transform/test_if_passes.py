"""Every pass on functions with an If: Before/Expected where the pass rewrites around or inside
it, and the VM giving the original's values for both values of the condition."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.ir import Function, If, IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    BundleModelParams,
    ChunkRows,
    DeadCodeElimination,
    KillAfterLastUse,
    LazyTransformParams,
    Pass,
    ScheduleForMemory,
    ToNonDataflow,
)
from tests.transform.harness import check_pass, same_bits


@I.ir_module
class Model:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        s = R.add(w2, w2)
        if cond:
            with R.dataflow():
                a = R.add(w1, s)
                dead = R.add(a, a)
                b = R.multiply(a, x)
                R.output(b)
            w = R.add(b, b)
        else:
            w = w2
        y = R.add(x, w)
        return y


def _run(mod: IRModule, cond: bool) -> Any:
    """`main` on fixed inputs: the VM's result."""
    x = np.arange(4, dtype=np.float32)
    w1, w2 = np.full(4, 2, np.float32), np.full(4, 5, np.float32)
    func = mod["main"]
    assert isinstance(func, Function)
    if len(func.params) == 2:  # bundled weights
        return VirtualMachine(mod)["main"](x, (w1, w2, np.array(cond)))
    return VirtualMachine(mod)["main"](x, w1, w2, np.array(cond))


def check_both_conditions(before: IRModule, after: IRModule) -> None:
    for cond in (True, False):
        assert same_bits(_run(after, cond), _run(before, cond))
    assert not same_bits(_run(before, True), _run(before, False))


@I.ir_module
class NonDataflow:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        s = R.add(w2, w2)
        if cond:
            a = R.add(w1, s)
            dead = R.add(a, a)
            b = R.multiply(a, x)
            w = R.add(b, b)
        else:
            w = w2
        y = R.add(x, w)
        return y


@I.ir_module
class NoDeadCode:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        s = R.add(w2, w2)
        if cond:
            with R.dataflow():
                a = R.add(w1, s)
                b = R.multiply(a, x)
                R.output(b)
            w = R.add(b, b)
        else:
            w = w2
        y = R.add(x, w)
        return y


@I.ir_module
class Killed:
    @R.function(pure=False)
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        s = R.add(w2, w2)
        if cond:
            a = R.add(w1, s)
            dead = R.add(a, a)
            _1 = R.vm.kill_object(dead)
            b = R.multiply(a, x)
            _2 = R.vm.kill_object(a)
            w_then = R.add(b, b)
            _3 = R.vm.kill_object(b)
            w = w_then
        else:
            w = w2
        _4 = R.vm.kill_object(s)  # w may be w2, a param: it is never killed
        y = R.add(x, w)
        return y


@I.ir_module
class Bundled:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        params: R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Tensor((), "bool")),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        w2 = params[1]
        s = R.add(w2, w2)
        cond = params[2]
        w1 = params[0]
        if cond:
            with R.dataflow():
                a = R.add(w1, s)
                dead = R.add(a, a)
                b = R.multiply(a, x)
                R.output(b)
            w = R.add(b, b)
        else:
            w = w2
        y = R.add(x, w)
        return y


@pytest.mark.parametrize(
    ("pass_", "expected"),
    [
        (ToNonDataflow(), NonDataflow),
        (DeadCodeElimination(), NoDeadCode),
        (KillAfterLastUse(), Killed),
        (BundleModelParams(), Bundled),
    ],
    ids=["to-non-dataflow", "dead-code", "kill-after-last-use", "bundle"],
)
def test_the_pass_rewrites_around_and_inside_the_if(pass_: Pass, expected: IRModule) -> None:
    after = check_pass(pass_, Model, expected)
    check_both_conditions(Model, after)


@I.ir_module
class Unordered:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((64,), "float32"), R.Tensor((64,), "float32"), R.Tensor((), "bool")
        ),
    ) -> R.Tuple(R.Tensor((64,), "float16"), R.Tensor((64,), "float32")):
        a = params[0]
        b = params[1]
        b_half = R.astype(b, "float16")
        cond = params[2]
        if cond:
            picked = R.add(a, a)
        else:
            picked = a
        a_half = R.astype(a, "float16")
        out = (a_half, picked)
        return out


def test_an_if_is_an_ordering_barrier_for_the_scheduler() -> None:
    after = ScheduleForMemory()(Unordered)
    func = after["main_transform_params"]
    assert isinstance(func, Function)
    names = [b.var.name_hint for b in func.bindings()]
    at = names.index("picked")
    assert isinstance(func.bindings()[at].value, If)
    assert set(names[:at]) == {"a", "b", "b_half", "cond"}
    assert names[at + 1 :] == ["a_half", "out"]
    weights = (np.arange(64, dtype=np.float32), np.ones(64, np.float32))
    for cond in (True, False):
        args = ((*weights, np.array(cond)),)
        expected = VirtualMachine(Unordered)["main_transform_params"](*args)
        assert same_bits(VirtualMachine(after)["main_transform_params"](*args), expected)


def test_chunking_leaves_the_if_alone_and_splits_the_rest() -> None:
    lazy = LazyTransformParams(strict=True)(Unordered)
    chunked = ChunkRows(64)(lazy)
    func = chunked["main_transform_params"]
    assert isinstance(func, Function)
    names = [b.var.name_hint for b in func.bindings()]
    assert names.count("picked") == 1
    assert any("get_item_rows" in str(b.value) for b in func.bindings())
    well_formed(chunked)


@I.ir_module
class UnusedIfs:
    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32"), cond: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        if cond:
            quiet = R.add(x, x)
        else:
            quiet = x
        if cond:
            noisy = R.call_packed("log", x, sinfo_args=(R.Object,))
        else:
            noisy = x
        return x


def test_dead_code_drops_an_unused_if_unless_a_branch_has_an_effect() -> None:
    after = DeadCodeElimination()(UnusedIfs)
    func = after["main"]
    assert isinstance(func, Function)
    assert [b.var.name_hint for b in func.bindings()] == ["noisy"]
