"""The VM's semantics: values in and out, function calls, externs, match_cast and its errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import VirtualMachine, register_func, remove_global_func
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T


@I.ir_module
class Values:
    @R.function
    def main(
        params: R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
        scale: R.Tensor((), dtype="float32"),
    ) -> R.Tuple(
        R.Tensor((3, 2), dtype="float32"), R.Prim("int64"), R.Tensor((2, 3), dtype="float32")
    ):
        a = params[0]
        b = params[1]
        t = R.permute_dims(a, axes=[1, 0])
        s = R.add(a, b)
        u = R.multiply(s, scale)
        out = (t, R.prim_value(7), u)
        return out

    @R.function
    def twice(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        y = R.add(x, x)
        return y

    @R.function
    def caller(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        cls = Values
        y = cls.twice(x)
        z = cls.twice(y)
        return z


def test_tuples_in_tuples_out_prim_values_as_ints() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, 2, 3], np.float32)
    t, seven, u = VirtualMachine(Values)["main"]((a, b), np.float32(2) * np.ones((), np.float32))
    np.testing.assert_array_equal(t, a.T)
    assert seven == 7 and isinstance(seven, int)
    np.testing.assert_array_equal(u, (a + b) * 2)


def test_a_list_is_accepted_for_a_tuple_param() -> None:
    a, b = np.zeros((2, 3), np.float32), np.zeros(3, np.float32)
    out = VirtualMachine(Values)["main"]([a, b], np.ones((), np.float32))
    assert isinstance(out, tuple)


def test_calls_to_module_functions() -> None:
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(VirtualMachine(Values)["caller"](x), x * 4)


def test_argument_errors_name_the_param() -> None:
    vm = VirtualMachine(Values)
    with pytest.raises(
        RuntimeExecError, match=r"function twice: expected 1 arguments \(x\), got 2"
    ):
        vm["twice"](np.ones((2, 3), np.float32), 1)
    with pytest.raises(
        RuntimeExecError,
        match=r'function twice: argument 0 \(x\): expected R.Tensor\(\(2, 3\), "float32"\), '
        r"got float16 array of shape \(2, 3\)",
    ):
        vm["twice"](np.ones((2, 3), np.float16))
    with pytest.raises(RuntimeExecError, match=r"expected a function of the module .* got 'nope'"):
        vm["nope"]


def test_a_caller_can_run_the_bindings_itself() -> None:
    vm = VirtualMachine(Values)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    frame = vm.prepare("caller", (x,))
    for index, binding in enumerate(vm.bindings("caller")):
        frame.values[binding.var] = vm.run_binding(frame, index)
    np.testing.assert_array_equal(vm.result(frame), x * 4)
    assert vm.stats.timeline[-1].function == "twice"  # the nested calls meter as usual
    with pytest.raises(RuntimeExecError, match=r"expected 1 arguments \(x\), got 0"):
        vm.prepare("twice", ())
    with pytest.raises(RuntimeExecError, match=r"Relax function of the module .* got 'nope'"):
        vm.bindings("nope")
    frame = vm.prepare("twice", (x,))
    with pytest.raises(RuntimeExecError, match=r"binding 0 \(y\): expected x to be live"):
        frame.values.clear()
        vm.run_binding(frame, 0)


@I.ir_module
class Lazy:
    @R.function(pure=False)
    def main() -> R.Tuple:
        a = R.call_packed("load", R.prim_value(0), R.str("w"), sinfo_args=(R.Object,))
        b = R.call_packed("save", R.prim_value(0), a, sinfo_args=(R.Object,))
        k = R.vm.kill_object(a)
        return R.tuple()


def test_externs_resolve_when_called_vm_table_first() -> None:
    calls: list[Any] = []
    vm = VirtualMachine(
        Lazy, externs={"load": lambda i, name: calls.append(("vm", i, name)) or np.zeros(2)}
    )

    @register_func("load")
    def global_load(i: int, name: str) -> np.ndarray:
        calls.append(("global", i, name))
        return np.zeros(2)

    try:
        register_func("save", lambda i, v: calls.append(("save", i)))  # after the VM was made
        vm["main"]()
        assert calls == [("vm", 0, "w"), ("save", 0)]
        vm2 = VirtualMachine(Lazy)
        vm2["main"]()
        assert calls[-2] == ("global", 0, "w")
        vm2.register("save", lambda i, v: calls.append(("own save", i)))
        vm2["main"]()
        assert calls[-1] == ("own save", 0)
    finally:
        remove_global_func("load")
        remove_global_func("save")


def test_missing_extern_names_the_extern_and_the_binding() -> None:
    vm = VirtualMachine(Lazy, externs={"load": lambda i, name: np.zeros(2)})
    with pytest.raises(
        RuntimeExecError, match=r"function main, binding 1 \(b\): extern 'save' is not registered"
    ):
        vm["main"]()


def test_an_extern_that_fails_gets_a_note_naming_the_binding() -> None:
    def load(i: int, name: str) -> None:
        raise KeyError(name)

    with pytest.raises(KeyError) as info:
        VirtualMachine(Lazy, externs={"load": load})["main"]()
    assert "while calling load in function main, binding 0 (a)" in info.value.__notes__


@I.ir_module
class Cast:
    @R.function
    def main(x: R.Object) -> R.Tensor(ndim=2, dtype="float32"):
        n = T.int64()
        y = R.match_cast(x, R.Tensor((n, 4), dtype="float32"))
        z = R.reshape(y, R.shape([n * 2, 2]))
        return z


def test_match_cast_binds_symbolic_dims() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(VirtualMachine(Cast)["main"](x), x.reshape(6, 2))


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (np.zeros((3, 5), np.float32), r"float32 array of shape \(3, 5\)"),
        (np.zeros((3, 4), np.float16), r"float16 array of shape \(3, 4\)"),
        (np.zeros(4, np.float32), r"float32 array of shape \(4,\)"),
        ((np.zeros((3, 4), np.float32),), "tuple of 1"),
    ],
)
def test_match_cast_mismatch_names_the_value_and_binding(value: Any, got: str) -> None:
    with pytest.raises(
        RuntimeExecError,
        match=r'function main, binding 0 \(y\): match_cast of x: expected R.Tensor\(\(n, 4\), "float32"\), got '
        + got,
    ):
        VirtualMachine(Cast)["main"](value)


@I.ir_module
class Callbacks:
    @R.function(pure=False)
    def main(
        fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
    ) -> R.Tuple:
        a = R.match_cast(fget_param(R.prim_value(0), R.str("w")), R.Tensor((2, 4), "float32"))
        t = R.permute_dims(a, axes=[1, 0])
        s0 = fset_output(R.prim_value(0), t)
        u = R.add(t, t)
        s1 = fset_output(R.prim_value(1), u)
        return R.tuple()


def test_callbacks_passed_as_function_params() -> None:
    """The callback style: get/set are params; a handed-off value is read, never written."""
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    outputs: dict[int, np.ndarray] = {}

    def fset_output(i: int, value: np.ndarray) -> None:
        value.flags.writeable = False  # a sink may keep it as it is
        outputs[i] = value

    vm = VirtualMachine(Callbacks)
    assert vm["main"](lambda i, name: w.copy(), fset_output) == ()
    np.testing.assert_array_equal(outputs[0], w.T)
    np.testing.assert_array_equal(outputs[1], w.T * 2)
    by_name = {e.name: e.bytes for e in vm.stats.timeline}
    assert by_name["t"] == 64  # a (dropped after its last use) and t
    assert by_name["s0"] == 0  # t handed off: it no longer counts, though u still reads it
    assert by_name["u"] == 32


def test_match_cast_of_a_call_names_the_callee_and_its_literal_operands() -> None:
    with pytest.raises(
        RuntimeExecError,
        match=r"binding 0 \(a\): match_cast of fget_param\(0, 'w'\): expected "
        r"R.Tensor\(\(2, 4\), \"float32\"\), got float64 array of shape \(3,\)",
    ):
        VirtualMachine(Callbacks)["main"](lambda i, name: np.zeros(3), lambda i, v: None)


@I.ir_module
class Symbolic:
    @T.prim_func
    def row_sum(x: T.Buffer(("n", "k"), "float32"), out: T.Buffer(("n",), "float32")):
        n = T.int64()
        k = T.int64()
        for i, j in T.grid(n, k):
            with T.block("sum"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    out[vi] = T.float32(0)
                out[vi] = out[vi] + x[vi, vj]

    @R.function
    def main(x: R.Tensor(("n", "k"), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        k = T.int64()
        cls = Symbolic
        y = R.call_tir(cls.row_sum, (x,), out_sinfo=R.Tensor((n,), "float32"))
        return y


def test_call_tir_with_symbolic_shapes() -> None:
    vm = VirtualMachine(Symbolic)
    for shape in [(5, 7), (2, 1)]:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(vm["main"](x), x.sum(axis=1), rtol=1e-6)
