"""The callback scenarios of TVM's LazyGetInput / LazySetOutput tests, in TVM's calling
convention: `fget_param` replaces the weights and `num_input` counts it; `fset_output` comes
after the runtime inputs when `num_input` is declared (then counting it), else last; a param
returned as it is leaves at the very start. Each result also runs on the VM."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import TransformError
from lazyparams.ir import IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyGetInput, LazySetOutput
from tests.transform.harness import Store, check_pass, run_eager, same_bits, weights_of

FUNC = "transform_params"
NAMED = [FUNC]


def _mul_add(returns_b: bool) -> IRModule:
    @I.ir_module
    class WithB:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (D, B)

    @I.ir_module
    class WithC:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (D, C)

    return WithB if returns_b else WithC


def _check_get(before: IRModule, after: IRModule) -> None:
    weights = weights_of(before, FUNC)
    store = Store(weights)
    got = VirtualMachine(after)[FUNC](store.get_item)
    assert same_bits(got, run_eager(before, weights, name=FUNC))
    assert sorted(store.loads) == list(range(len(weights)))


def _check_set(before: IRModule, after: IRModule, runtime: int = 0) -> Store:
    weights = weights_of(before, FUNC)
    store = Store(weights)
    args = (*weights[:runtime], store.set_item, *weights[runtime:])
    assert VirtualMachine(after)[FUNC](*args) == ()
    expected = run_eager(before, weights, name=FUNC)
    assert same_bits(store.output_tuple(), expected if isinstance(expected, tuple) else (expected,))
    return store


def test_get_item_callback() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple(R.Tensor((16, 16), "float32"), R.Tensor((16, 16), "float32")):
            R.func_attr({"num_input": 1})
            A = R.match_cast(fget_param(R.prim_value(0), R.str("A")), R.Tensor([16, 16], "float32"))
            C = R.multiply(A, R.const(2, "float32"))
            B = R.match_cast(fget_param(R.prim_value(1), R.str("B")), R.Tensor([16, 16], "float32"))
            D = R.add(C, B)
            return (D, B)

    before = _mul_add(returns_b=True)
    _check_get(before, check_pass(LazyGetInput(func_names=NAMED), before, Expected))


def test_get_item_callback_dynamic_shape() -> None:
    @I.ir_module
    class Before:
        @R.function
        def transform_params(
            A: R.Tensor(["m", "n"], "float32"), B: R.Tensor(["m", "n"], "float32")
        ) -> R.Tuple(R.Tensor(["m", "n"], "float32"), R.Tensor(["m", "n"], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (D, B)

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple(R.Tensor(ndim=2, dtype="float32"), R.Tensor(ndim=2, dtype="float32")):
            R.func_attr({"num_input": 1})
            m = T.int64()
            n = T.int64()
            A = R.match_cast(fget_param(R.prim_value(0), R.str("A")), R.Tensor([m, n], "float32"))
            C = R.multiply(A, R.const(2, "float32"))
            B = R.match_cast(fget_param(R.prim_value(1), R.str("B")), R.Tensor([m, n], "float32"))
            D = R.add(C, B)
            return (D, B)

    after = check_pass(LazyGetInput(func_names=NAMED), Before, Expected)
    weights = (np.ones((2, 5), "float32"), np.full((2, 5), 3.0, "float32"))
    store = Store(weights)
    got = VirtualMachine(after)[FUNC](store.get_item)
    assert same_bits(got, run_eager(Before, weights, name=FUNC))
    bad = Store((weights[0], np.ones((5, 2), "float32")))
    with pytest.raises(Exception, match=r"fget_param\(1, 'B'\): expected R.Tensor\(\(m, n\)"):
        VirtualMachine(after)[FUNC](bad.get_item)


def test_set_output_callback() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            B: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            C = R.multiply(A, R.const(2, "float32"))
            _ = fset_output(R.prim_value(1), C)
            D = R.add(C, B)
            _1 = fset_output(R.prim_value(0), D)
            return R.tuple()

    before = _mul_add(returns_b=False)
    _check_set(before, check_pass(LazySetOutput(func_names=NAMED), before, Expected), runtime=2)


def test_set_output_callback_of_param() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            B: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            _ = fset_output(R.prim_value(1), B)
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            _1 = fset_output(R.prim_value(0), D)
            return R.tuple()

    before = _mul_add(returns_b=True)
    _check_set(before, check_pass(LazySetOutput(func_names=NAMED), before, Expected), runtime=2)


def test_set_output_callback_num_input() -> None:
    @I.ir_module
    class Before:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            R.func_attr({"num_input": 1})
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (D, B)

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            B: R.Tensor([16, 16], "float32"),
        ) -> R.Tuple:
            R.func_attr({"num_input": 2})
            _ = fset_output(R.prim_value(1), B)
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            _1 = fset_output(R.prim_value(0), D)
            return R.tuple()

    _check_set(Before, check_pass(LazySetOutput(func_names=NAMED), Before, Expected), runtime=1)


def test_set_output_callback_with_duplicate_output() -> None:
    @I.ir_module
    class Before:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (D, D)

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            B: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            _ = fset_output(R.prim_value(0), D)
            _1 = fset_output(R.prim_value(1), D)
            return R.tuple()

    _check_set(Before, check_pass(LazySetOutput(func_names=NAMED), Before, Expected), runtime=2)


def test_set_output_callback_with_inline_const() -> None:
    @I.ir_module
    class Before:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return (C, D, R.prim_value(42), R.const(17.5, "float16"))

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            B: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            C = R.multiply(A, R.const(2, "float32"))
            _ = fset_output(R.prim_value(0), C)
            D = R.add(C, B)
            _1 = fset_output(R.prim_value(1), D)
            _2 = fset_output(R.prim_value(2), R.prim_value(42))
            _3 = fset_output(R.prim_value(3), R.const(17.5, "float16"))
            return R.tuple()

    _check_set(Before, check_pass(LazySetOutput(func_names=NAMED), Before, Expected), runtime=2)


def test_set_output_callback_with_non_tuple_output() -> None:
    @I.ir_module
    class Before:
        @R.function
        def transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            return D

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def transform_params(
            A: R.Tensor([16, 16], "float32"),
            B: R.Tensor([16, 16], "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            C = R.multiply(A, R.const(2, "float32"))
            D = R.add(C, B)
            _ = fset_output(R.prim_value(0), D)
            return R.tuple()

    _check_set(Before, check_pass(LazySetOutput(func_names=NAMED), Before, Expected), runtime=2)


def test_get_input_refuses_a_callback_left_among_the_weights() -> None:
    after_set = LazySetOutput(func_names=NAMED)(_mul_add(returns_b=False))
    with pytest.raises(TransformError, match="got the callable 'fset_output' after the runtime"):
        LazyGetInput(func_names=NAMED)(after_set)


def _public_and_private() -> IRModule:
    @I.ir_module
    class Before:
        @R.function
        def main(w: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            y = R.add(w, w)
            return y

        @R.function(private=True)
        def helper(w: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return w

    return Before


def test_every_public_mode_rewrites_each_public_function_as_tvm_does() -> None:
    before = _public_and_private()
    for pass_ in (LazyGetInput(every_public=True), LazySetOutput(every_public=True)):
        after = pass_(before)
        assert after["helper"] is before["helper"]
        assert after["main"] is not before["main"]
    by_suffix = LazyGetInput()(before)
    assert by_suffix["main"] is before["main"]


def test_every_public_refuses_func_names_too() -> None:
    with pytest.raises(TransformError, match="expected every_public=True without func_names"):
        LazyGetInput(func_names=["main"], every_public=True)
