"""More LiftTransformParams scenarios of TVM's tests: tuples of weights, several functions each
with its own transform, a function whose only param is a runtime shape, a primitive weight, a
weight dim in the params' shapes."""

from __future__ import annotations

import numpy as np

from lazyparams.ir import Function, TupleStructInfo
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LiftTransformParams
from tests.transform.harness import assert_round_trip, assert_well_formed, check_pass, same_bits
from tests.transform.lift_scenarios import SCENARIOS, RuntimeShape
from tests.transform.lift_scenarios_shared import SHARED_SCENARIOS

LIFT = LiftTransformParams()


def test_tuples_built_from_weights_lift_and_both_uses_become_params() -> None:
    """TVM's test_tuple: both uses stay params of the model; the transform folds the items of
    the tuples it builds into the weight itself (TVM loads params[0] twice, once per output;
    here it is loaded once, as every input is)."""

    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (2, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                inner = (w,)
                outer = (inner,)
                got_inner = outer[0]
                got = got_inner[0]
                a = R.matmul(x, got)
                b = R.matmul(a, w)
                R.output(b)
            return b

    @I.ir_module
    class Expected:
        @R.function
        def main(
            x: R.Tensor((2, 4), "float32"),
            w: R.Tensor((4, 4), "float32"),
            got: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((2, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                a = R.matmul(x, got)
                b = R.matmul(a, w)
                R.output(b)
            return b

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w = params[0]
                gv = (w, w)
                R.output(gv)
            return gv

    after = check_pass(LIFT, Before, Expected)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 4), "float32"), rng.standard_normal((4, 4), "float32")
    vm = VirtualMachine(after)
    assert same_bits(vm["main"](x, *vm["main_transform_params"]((w,))), x @ w @ w)


def test_each_function_with_num_input_gets_its_own_transform() -> None:
    @I.ir_module
    class Before:
        @R.function
        def first(x: R.Tensor((3, 3), "float32"), w: R.Tensor((3, 3), "float32")) -> R.Tensor(
            (3, 3), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w_t = R.permute_dims(w)
                y = R.matmul(x, w_t)
                R.output(y)
            return y

        @R.function
        def second(x: R.Tensor((3, 3), "float32"), w: R.Tensor((2, 3), "float32")) -> R.Tensor(
            (3, 2), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w_t = R.permute_dims(w)
                y = R.matmul(x, w_t)
                R.output(y)
            return y

        @R.function
        def untouched(x: R.Tensor((3, 3), "float32"), w: R.Tensor((3, 3), "float32")) -> R.Tensor(
            (3, 3), "float32"
        ):
            with R.dataflow():
                w_t = R.permute_dims(w)
                y = R.matmul(x, w_t)
                R.output(y)
            return y

    after = LIFT(Before)
    assert_well_formed(after)
    assert_round_trip(after)
    assert sorted(after.names()) == [
        "first",
        "first_transform_params",
        "second",
        "second_transform_params",
        "untouched",
    ]
    assert after["untouched"] is Before["untouched"]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 3), "float32")
    vm = VirtualMachine(after)
    for name, rows in [("first", 3), ("second", 2)]:
        w = rng.standard_normal((rows, 3), "float32")
        (w_t,) = vm[name + "_transform_params"]((w,))
        assert same_bits(vm[name](x, w_t), x @ w.T)


def test_a_function_of_a_runtime_shape_alone_gets_an_empty_transform() -> None:
    Before = RuntimeShape
    after = LIFT(Before)
    assert_well_formed(after)
    assert after["main"] == Before["main"] or after["main"].params == Before["main"].params
    transform = after["main_transform_params"]
    assert isinstance(transform, Function)
    assert transform.ret_struct_info == TupleStructInfo(())
    assert VirtualMachine(after)["main_transform_params"](()) == ()


def test_a_primitive_weight_defining_a_dim_moves_into_the_transform() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(
            x: R.Tensor(dtype="float32", ndim=1),
            extent: R.Prim("int64"),
            weight: R.Tensor(["extent"], "float32"),
        ):
            R.func_attr({"num_input": 1})
            squared = R.multiply(weight, weight)
            out = R.add(x, squared)
            return out

    after = LIFT(Before)
    assert_well_formed(after)
    assert_round_trip(after)
    main = after["main"]
    assert isinstance(main, Function)
    assert [p.name_hint for p in main.params] == ["x", "squared"]
    weight = np.arange(5, dtype="float32")
    vm = VirtualMachine(after)
    (squared,) = vm["main_transform_params"]((np.int64(5), weight))
    x = np.ones(5, "float32")
    assert same_bits(vm["main"](x, squared), x + weight * weight)


def test_symbolic_var_in_param_shape_lifts_with_the_weights_dim() -> None:
    """The weights' dim m is known to the transform; zeros of the input's n stays."""

    @I.ir_module
    class Expected:
        @R.function
        def main(
            x: R.Tensor((2, "n"), "float32"),
            w2: R.Tensor(("m", 2), "float32"),
            w1_1: R.Tensor(("m", 2), "float32"),
        ) -> R.Tensor(("m", "n"), "float32"):
            n = T.int64()
            m = T.int64()
            R.func_attr({"num_input": 1})
            with R.dataflow():
                zeros = R.zeros((n, n), "float32")
                y1 = R.matmul(w1_1, x)
                y2 = R.matmul(w2, x)
                y = R.add(y1, y2)
                R.output(y)
            return y

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor(("m", 2), "float32"), R.Tensor(("m", 2), "float32")),
        ) -> R.Tuple(R.Tensor(("m", 2), "float32"), R.Tensor(("m", 2), "float32")):
            m = T.int64()
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w1 = params[0]
                w1_1 = R.add(w1, R.const(1, "float32"))
                w2 = params[1]
                gv = (w2, w1_1)
                R.output(gv)
            return gv

    check_pass(LIFT, SCENARIOS["param_shape"], Expected)


def test_multiple_functions_each_get_a_transform_and_the_one_without_num_input_none() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def func1(x: R.Tensor((4, 4), "float32"), w1_t: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (4, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y = R.matmul(x, w1_t)
                R.output(y)
            return y

        @R.function
        def func2(x: R.Tensor((4, 4), "float32"), w1_t: R.Tensor((4, 2), "float32")) -> R.Tensor(
            (4, 2), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y = R.matmul(x, w1_t)
                R.output(y)
            return y

        @R.function
        def func3(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (4, 4), "float32"
        ):
            with R.dataflow():
                w1_t = R.permute_dims(w1, axes=[1, 0])
                y = R.matmul(x, w1_t)
                R.output(y)
            return y

        @R.function
        def func1_transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w1 = params[0]
                w1_t = R.permute_dims(w1, axes=[1, 0])
                gv = (w1_t,)
                R.output(gv)
            return gv

        @R.function
        def func2_transform_params(
            params: R.Tuple(R.Tensor((2, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 2), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w1 = params[0]
                w1_t = R.permute_dims(w1, axes=[1, 0])
                gv = (w1_t,)
                R.output(gv)
            return gv

    check_pass(LIFT, SHARED_SCENARIOS["multiple_functions"][0], Expected)
