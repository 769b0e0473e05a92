"""The VM runs an If: the branch the condition (a 0-d bool tensor or a bool prim value) picks,
its own values freed after their last use inside it, and metered binding by binding."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.ir import IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import KillAfterLastUse


@I.ir_module
class Branchy:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        if cond:
            a = R.add(w1, w1)
            w = R.multiply(a, x)
        else:
            w = w2
        y = R.add(x, w)
        return y

    @R.function
    def on_prim(x: R.Tensor((4,), "float32"), flag: R.Prim("bool")) -> R.Tensor((4,), "float32"):
        if flag:
            y = R.add(x, x)
        else:
            y = R.multiply(x, x)
        return y

    @R.function
    def on_object(x: R.Tensor((4,), "float32"), flag: R.Object) -> R.Tensor((4,), "float32"):
        if flag:
            y = x
        else:
            y = x
        return y


X = np.arange(4, dtype=np.float32)
W1 = np.ones(4, np.float32)
W2 = np.full(4, 5, np.float32)


@pytest.mark.parametrize("mod", [Branchy, KillAfterLastUse()(Branchy)], ids=["plain", "killed"])
def test_each_branch_gives_its_value(mod: IRModule) -> None:
    vm = VirtualMachine(mod)
    np.testing.assert_array_equal(vm["main"](X, W1, W2, np.array(True)), X + (W1 + W1) * X)
    np.testing.assert_array_equal(vm["main"](X, W1, W2, np.array(False)), X + W2)


def test_a_prim_bool_condition() -> None:
    vm = VirtualMachine(Branchy)
    np.testing.assert_array_equal(vm["on_prim"](X, True), X + X)
    np.testing.assert_array_equal(vm["on_prim"](X, False), X * X)


def test_a_condition_that_is_no_boolean_scalar_is_refused() -> None:
    vm = VirtualMachine(Branchy)
    with pytest.raises(
        RuntimeExecError, match=r"binding 0 \(y\): the If's condition: expected a 0-d"
    ):
        vm["on_object"](X, np.array([True, False]))


def test_the_branch_is_metered_and_frees_its_own_values() -> None:
    vm = VirtualMachine(Branchy)
    vm["main"](X, W1, W2, np.array(True))
    params = 3 * 16 + 1
    steps = [(e.index, e.name, e.bytes) for e in vm.stats.timeline]
    # params; a; w_then (a freed right after); the If's var (w1, w2, cond die after it); y
    assert steps == [
        (-1, "(params)", params),
        (0, "a", params + 16),
        (0, "w_then", params + 32),
        (0, "w", params + 16),
        (1, "y", 16 + 16 + 16),
    ]
    assert vm.stats.peak_bytes == params + 32 and vm.stats.peak_binding == "w_then"
    vm["main"](X, W1, W2, np.array(False))
    assert [e.bytes for e in vm.stats.timeline] == [params, params, 48]  # w is w2 itself
