"""LazyGetInput and LazySetOutput: loads and hand-offs through callback params."""

from __future__ import annotations

import numpy as np

from lazyparams.ir import FuncStructInfo, IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import KillAfterLastUse, LazyGetInput, LazySetOutput, Sequential
from tests.transform.harness import (
    FUNC,
    Store,
    check_kills,
    check_pass,
    run_eager,
    same_bits,
    weights_of,
)


def _unpacked() -> IRModule:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            x: R.Tensor((3,), "float32"),
            w0: R.Tensor((3,), "float32"),
            w1: R.Tensor((2, 3), "float32"),
        ) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3, 2), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                lv = R.add(x, w0)
                lv1 = R.permute_dims(w1, axes=[1, 0])
                gv = (lv, lv1)
                R.output(gv)
            return gv

    return Before


X = np.array([1.0, -2.0, 0.5], "float32")


def test_lazy_get_input_loads_each_weight_at_its_first_use() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params(
            x: R.Tensor((3,), "float32"),
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3, 2), "float32")):
            R.func_attr({"num_input": 2})
            w0 = R.match_cast(fget_param(R.prim_value(0), R.str("w0")), R.Tensor((3,), "float32"))
            lv = R.add(x, w0)
            w1 = R.match_cast(fget_param(R.prim_value(1), R.str("w1")), R.Tensor((2, 3), "float32"))
            lv1 = R.permute_dims(w1, axes=[1, 0])
            gv = (lv, lv1)
            return gv

    before = _unpacked()
    after = check_pass(LazyGetInput(), before, Expected)
    assert after[FUNC].params[1].struct_info == FuncStructInfo(
        (R.Prim("int64"), R.Object), R.Object, False
    )
    weights = weights_of(before, runtime=1)
    store = Store(weights)
    result = VirtualMachine(after)[FUNC](X, store.get_item)
    assert same_bits(result, run_eager(before, weights, (X,)))
    assert store.names == ["w0", "w1"]


def test_lazy_set_output_hands_off_each_output_and_returns_unit() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params(
            x: R.Tensor((3,), "float32"),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            w0: R.Tensor((3,), "float32"),
            w1: R.Tensor((2, 3), "float32"),
        ) -> R.Tuple:
            R.func_attr({"num_input": 2})
            lv = R.add(x, w0)
            lv2 = fset_output(R.prim_value(0), lv)
            lv1 = R.permute_dims(w1, axes=[1, 0])
            lv3 = fset_output(R.prim_value(1), lv1)
            return R.tuple()

    before = _unpacked()
    after = check_pass(LazySetOutput(), before, Expected)
    weights = weights_of(before, runtime=1)
    store = Store(weights)
    assert VirtualMachine(after)[FUNC](X, store.set_item, *weights) == ()
    assert same_bits(store.output_tuple(), run_eager(before, weights, (X,)))


def test_both_callbacks_and_kills_on_a_tuple_param_with_recorded_names() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3,), "float32")),
        ):
            R.func_attr({"input_names": ("layer.w", "layer.b")})
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1, params[1], R.const([1.0], "float32"))
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params(
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            R.func_attr({"input_names": ("layer.w", "layer.b"), "num_input": 2})
            lv = R.match_cast(
                fget_param(R.prim_value(0), R.str("layer.w")), R.Tensor((2, 3), "float32")
            )
            lv1 = R.permute_dims(lv, axes=[1, 0])
            lv3 = fset_output(R.prim_value(0), lv1)
            lv2 = R.vm.kill_object(lv)
            # LazyGetInput types the returned weight, to keep the function's result type
            params_1 = R.match_cast(
                fget_param(R.prim_value(1), R.str("layer.b")), R.Tensor((3,), "float32")
            )
            lv4 = fset_output(R.prim_value(1), params_1)
            lv5 = fset_output(R.prim_value(2), R.const([1.0], "float32"))
            return R.tuple()

    pipeline = Sequential([LazyGetInput(), LazySetOutput(), KillAfterLastUse()])
    after = check_pass(pipeline, Before, Expected)
    check_kills(after[FUNC])
    weights = weights_of(Before)
    store = Store(weights)
    VirtualMachine(after)[FUNC](store.get_item, store.set_item)
    assert same_bits(store.output_tuple(), run_eager(Before, weights))
    assert store.names == ["layer.w", "layer.b"]


def test_callback_passes_apply_only_to_transform_functions_or_named_ones() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

    assert LazyGetInput()(Before)["main"] is Before["main"]
    assert LazySetOutput()(Before)["main"] is Before["main"]
    named = LazyGetInput(func_names=["main"])(Before)["main"]
    assert [p.name_hint for p in named.params] == ["fget_param"]
    assert not named.is_pure
