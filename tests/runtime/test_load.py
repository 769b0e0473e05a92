"""What the VM refuses when it loads a module, before any data is read, and run-time misuse."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.ir import IRModule
from lazyparams.ir.prim import Add, IntImm, PrimVar, Sub
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.tir import For, PrimFunc
from tests.tir import builders as B


@I.ir_module
class Copy:
    @T.prim_func
    def copy(x: T.Buffer((4,), "float32"), out: T.Buffer((4,), "float32")):
        for i in T.grid(4):
            with T.block("c"):
                vi = T.axis.remap("S", [i])
                out[vi] = x[vi]

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Copy
        y = R.call_tir(cls.copy, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function
    def arity(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Copy
        y = R.call_tir(cls.copy, (x, x), out_sinfo=R.Tensor((4,), "float32"))
        return y


def _prefix_sum() -> PrimFunc:
    """out[i] = out[i - 1] + x[i]: each iteration needs the one before, not vectorisable."""
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    value = Add(B.load(out, Sub(i, IntImm(1, "int32"))), B.load(x, i))
    return PrimFunc(
        (x, out), For(i, IntImm(1, "int32"), IntImm(3, "int32"), B.store(out, value, i))
    )


def _without(mod: IRModule, *names: str) -> IRModule:
    for name in names:
        mod = mod.without_function(name)
    return mod


def test_the_good_function_runs() -> None:
    vm = VirtualMachine(_without(Copy, "arity"))
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(vm["main"](x), x)
    out = np.zeros(4, np.float32)
    assert vm["copy"](x, out) is None  # a PrimFunc runs in place, destination-passing
    np.testing.assert_array_equal(out, x)


def test_an_unsupported_prim_func_fails_at_load() -> None:
    mod = _without(Copy, "arity").with_function("copy", _prefix_sum())
    with pytest.raises(
        RuntimeExecError, match="PrimFunc copy: body: loop i: store to out reads out elsewhere"
    ):
        VirtualMachine(mod)


def test_call_tir_arity_is_checked_at_load() -> None:
    with pytest.raises(
        RuntimeExecError,
        match=r"function arity, binding 0 \(y\): call_tir of copy expected 2 inputs and outputs, got 2 inputs and 1 outputs",
    ):
        VirtualMachine(Copy)


def test_a_prim_func_that_writes_its_input_is_refused() -> None:
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    writes_x = PrimFunc(
        (x, out), For(i, IntImm(0, "int32"), IntImm(4, "int32"), B.store(x, B.load(out, i), i))
    )
    mod = _without(Copy, "arity").with_function("copy", writes_x)
    with pytest.raises(RuntimeExecError, match="expected the PrimFunc to write only its outputs"):
        VirtualMachine(mod)


def test_call_tir_of_a_relax_function_is_refused() -> None:
    mod = _without(Copy, "arity", "copy").with_function("copy", Copy["main"])
    with pytest.raises(
        RuntimeExecError, match="call_tir expected a PrimFunc of the module, got copy"
    ):
        VirtualMachine(mod)


@I.ir_module
class Kills:
    @R.function(pure=False)
    def twice(x: R.Tensor((4,), "float32")) -> R.Tuple:
        a = R.add(x, x)
        k0 = R.vm.kill_object(a)
        k1 = R.vm.kill_object(a)
        return R.tuple()

    @R.function(pure=False)
    def use_after(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        a = R.add(x, x)
        k0 = R.vm.kill_object(a)
        b = R.add(a, a)
        return b


def test_killing_twice_and_use_after_kill_are_run_time_errors() -> None:
    vm = VirtualMachine(Kills)
    x = np.ones(4, np.float32)
    with pytest.raises(
        RuntimeExecError,
        match=r"binding 2 \(k1\): kill_object\(a\) expected a live value, got one already freed",
    ):
        vm["twice"](x)
    with pytest.raises(
        RuntimeExecError, match=r"binding 2 \(b\): expected a to be live, got it already freed"
    ):
        vm["use_after"](x)
    assert vm.stats.current_bytes == 0  # a failed run still releases its frame


def test_not_a_module() -> None:
    with pytest.raises(RuntimeExecError, match="expected an IRModule, got dict"):
        VirtualMachine({})  # type: ignore[arg-type]
    with pytest.raises(RuntimeExecError, match="expected an extern name and a callable"):
        VirtualMachine(Kills, externs={"f": 3})  # type: ignore[dict-item]
