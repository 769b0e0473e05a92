"""LiftTransformParams on the scenarios of TVM's tests: Before/Expected in the script syntax, and
on the VM `main(x, *main_transform_params(weights))` equals the original `main(x, *weights)`."""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyparams.ir import Function, IRModule, TensorStructInfo, assert_structural_equal
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams, LiftTransformParams
from tests.transform.harness import Store, assert_well_formed, check_pass, same_bits

LIFT = LiftTransformParams()


def _arrays(func: Function, first: int, sizes: dict[str, int] | None = None) -> list[Any]:
    """Random arrays for the params of `func` from `first` on (symbolic dims from `sizes`)."""
    rng = np.random.default_rng(0)
    arrays = []
    for param in func.params[first:]:
        sinfo = param.struct_info
        assert isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
        dims = sinfo.shape
        shape = tuple(d.value if isinstance(d, IntImm) else (sizes or {})[d.name] for d in dims)
        arrays.append(rng.standard_normal(shape).astype(sinfo.dtype))
    return arrays


def check_lifted(before: IRModule, after: IRModule, name: str = "main", **sizes: int) -> None:
    """The lifted pair computes what the original function computes, bit for bit."""
    func = before[name]
    assert isinstance(func, Function)
    first = int(func.attrs["num_input"])
    inputs = _arrays(func, 0, sizes)
    runtime, weights = inputs[:first], inputs[first:]
    expected = VirtualMachine(before)[name](*runtime, *weights)
    vm = VirtualMachine(after)
    transformed = vm[name + "_transform_params"](tuple(weights))
    assert same_bits(vm[name](*runtime, *transformed), expected)


def test_basic() -> None:
    @I.ir_module
    class Before:
        @T.prim_func
        def transpose(w1: T.Buffer((3, 4), "float32"), out: T.Buffer((4, 3), "float32")):
            for i, j in T.grid(4, 3):
                with T.block("t"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    out[vi, vj] = w1[vj, vi]

        @R.function
        def main(
            x: R.Tensor((2, 4), "float32"),
            w1: R.Tensor((3, 4), "float32"),
            w2: R.Tensor((3, 3), "float32"),
        ) -> R.Tensor((2, 3), "float32"):
            R.func_attr({"num_input": 1})
            cls = Before
            with R.dataflow():
                w1_transformed = R.call_tir(
                    cls.transpose, (w1,), out_sinfo=R.Tensor((4, 3), "float32")
                )
                y1 = R.matmul(x, w1_transformed)
                y2 = R.matmul(y1, w2)
                R.output(y2)
            return y2

    @I.ir_module
    class Expected:
        @T.prim_func
        def transpose(w1: T.Buffer((3, 4), "float32"), out: T.Buffer((4, 3), "float32")):
            for i, j in T.grid(4, 3):
                with T.block("t"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    out[vi, vj] = w1[vj, vi]

        @R.function
        def main(
            x: R.Tensor((2, 4), "float32"),
            w2: R.Tensor((3, 3), "float32"),
            w1_transformed: R.Tensor((4, 3), "float32"),
        ) -> R.Tensor((2, 3), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_transformed)
                y2 = R.matmul(y1, w2)
                R.output(y2)
            return y2

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((3, 3), "float32")),
        ) -> R.Tuple(R.Tensor((3, 3), "float32"), R.Tensor((4, 3), "float32")):
            R.func_attr({"num_input": 0})
            cls = Expected
            with R.dataflow():
                lv1: R.Tensor((3, 4), "float32") = params[0]
                lv2 = R.call_tir(cls.transpose, (lv1,), out_sinfo=R.Tensor((4, 3), "float32"))
                lv: R.Tensor((3, 3), "float32") = params[1]
                gv = (lv, lv2)
                R.output(gv)
            return gv

    after = check_pass(LIFT, Before, Expected)
    check_lifted(Before, after)


def test_stop_lifting() -> None:
    @I.ir_module
    class Before:
        @R.function
        def func1(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (4, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w1_t = R.permute_dims(w1, axes=[1, 0])
                w1_t1 = R.builtin.stop_lift_params(w1_t)
                w1_add = R.add(w1_t1, R.const(1, "float32"))
                y = R.matmul(x, w1_add)
                R.output(y)
            return y

    @I.ir_module
    class Expected:
        @R.function
        def func1(x: R.Tensor((4, 4), "float32"), param0: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (4, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w1_add = R.add(param0, R.const(1, "float32"))
                y = R.matmul(x, w1_add)
                R.output(y)
            return y

        @R.function
        def func1_transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                lv: R.Tensor((4, 4), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1,)
                R.output(gv)
            return gv

    after = check_pass(LIFT, Before, Expected)
    check_lifted(Before, after, "func1")
    assert "stop_lift_params" in Before.script()
    x, w = np.ones((4, 4), "float32"), np.eye(4, dtype="float32")
    assert same_bits(VirtualMachine(Before)["func1"](x, w), x @ (w.T + 1))


def test_only_lift_when_variable_uses_weights() -> None:
    """`R.ones` reads no weight: it stays, and is copied into the transform that needs it."""

    @I.ir_module
    class Before:
        @R.function
        def main(A: R.Tensor([16], "int32"), B: R.Tensor([16], "int32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                offset = R.ones([16], "int32")
                A_offset = R.add(A, offset)
                B_offset = R.add(B, offset)
                output = R.multiply(A_offset, B_offset)
                R.output(output)
            return output

    @I.ir_module
    class Expected:
        @R.function
        def main(A: R.Tensor([16], "int32"), B_offset: R.Tensor([16], "int32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                offset = R.ones([16], "int32")
                A_offset = R.add(A, offset)
                output = R.multiply(A_offset, B_offset)
                R.output(output)
            return output

        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor([16], "int32"))):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                offset = R.ones([16], "int32")
                B = params[0]
                B_offset = R.add(B, offset)
                output = (B_offset,)
                R.output(output)
            return output

    after = check_pass(LIFT, Before, Expected)
    check_lifted(Before, after)


def _lora() -> IRModule:
    @I.ir_module
    class Module:
        @R.function
        def main(
            state: R.Tensor(["batch_size", 8], "float32"),
            base_weights: R.Tensor([8, 8], "float32"),
            lora_A: R.Tensor([8, "lora_rank"], "float32"),
            lora_B: R.Tensor(["lora_rank", 8], "float32"),
        ):
            R.func_attr({"num_input": 1})
            folded_weights = R.add(base_weights, R.matmul(lora_A, lora_B))
            output = R.matmul(state, folded_weights)
            return output

    return Module


def test_symbolic_dims_of_the_weights_lift_and_those_of_the_inputs_stay() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main(
            state: R.Tensor(["batch_size", 8], "float32"),
            folded_weights: R.Tensor([8, 8], "float32"),
        ) -> R.Tensor(["batch_size", 8], "float32"):
            R.func_attr({"num_input": 1})
            output = R.matmul(state, folded_weights)
            return output

        @R.function
        def main_transform_params(
            params: R.Tuple(
                R.Tensor([8, 8], "float32"),
                R.Tensor([8, "lora_rank"], "float32"),
                R.Tensor(["lora_rank", 8], "float32"),
            ),
        ) -> R.Tuple(R.Tensor([8, 8], "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                base_weights = params[0]
                lora_A = params[1]
                lora_B = params[2]
                folded_weights = R.add(base_weights, R.matmul(lora_A, lora_B))
                gv = (folded_weights,)
                R.output(gv)
            return gv

    after = check_pass(LIFT, _lora(), Expected)
    check_lifted(_lora(), after, batch_size=3, lora_rank=2)


def test_lift_transform_is_idempotent() -> None:
    once = LIFT(_lora())
    twice = LIFT(once)
    assert len(twice.names()) == 2
    assert_structural_equal(once, twice)


def test_the_lifted_transform_runs_lazily() -> None:
    """Lifted, then made lazy: the weights stream through get_item / set_item once, and the
    model function on the handed-off values gives the original result."""
    before = _lora()
    lazy = LazyTransformParams(strict=True)(LIFT(before))
    func = before["main"]
    assert isinstance(func, Function)
    state, *weights = _arrays(func, 0, {"batch_size": 3, "lora_rank": 2})
    store = Store(tuple(weights))
    vm = VirtualMachine(lazy, {"get_item": store.get_item, "set_item": store.set_item})
    vm["main_transform_params"]()
    assert sorted(store.loads) == [0, 1, 2]
    got = vm["main"](state, *store.output_tuple())
    assert same_bits(got, VirtualMachine(before)["main"](state, *weights))


def test_an_existing_identity_transform_composes_to_a_plain_lift() -> None:
    """More to lift next to an existing transform: the new work runs after the old transform,
    so an identity one gives what lifting without it gives."""
    func = _lora()["main"]
    assert isinstance(func, Function)

    @I.ir_module
    class Identity:
        @R.function
        def main_transform_params(
            model_params: R.Tuple(
                R.Tensor((8, 8), "float32"),
                R.Tensor((8, "lora_rank"), "float32"),
                R.Tensor(("lora_rank", 8), "float32"),
            ),
        ):
            R.func_attr({"num_input": 0})
            return model_params

    with_identity = IRModule(
        {"main": func, "main_transform_params": Identity["main_transform_params"]}
    )
    assert_structural_equal(LIFT(with_identity), LIFT(_lora()), map_free_vars=True)


def test_an_existing_transform_runs_before_the_newly_lifted_work() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32")) -> R.Tensor(
            (2, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                squared = R.multiply(w, w)
                y = R.matmul(x, squared)
                R.output(y)
            return y

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 3), "float32")),
        ) -> R.Tuple(R.Tensor((3, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                raw = params[0]
                w = R.permute_dims(raw)
                gv = (w,)
                R.output(gv)
            return gv

    after = LIFT(Before)
    assert_well_formed(after)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype("float32")
    raw = rng.standard_normal((4, 3)).astype("float32")
    old = VirtualMachine(Before)
    expected = old["main"](x, *old["main_transform_params"]((raw,)))
    vm = VirtualMachine(after)
    (transformed,) = vm["main_transform_params"]((raw,))
    assert transformed.shape == (3, 4)
    assert same_bits(vm["main"](x, transformed), expected)
    assert_structural_equal(LIFT(after), after)


def test_functions_without_num_input_are_left_alone() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(w: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            y = R.add(w, w)
            return y

    assert LIFT(Before)["main"] is Before["main"]
