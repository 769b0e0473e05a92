"""DeadCodeElimination: dead pure bindings and unreachable functions go, effects stay."""

from __future__ import annotations

import pytest

from lazyparams.errors import TransformError
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import DeadCodeElimination
from tests.transform.harness import assert_well_formed, check_pass


@I.ir_module
class WithKernels:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor(("n",), "float32")),
    ) -> R.Tuple(R.Tensor((3, 2), "float32")):
        n = T.int64()
        with R.dataflow():
            lv = params[0]
            dead = R.call_tir(WithKernels.copy, (lv,), out_sinfo=R.Tensor((2, 3), "float32"))
            dead2 = R.astype(dead, "float16")
            lv1 = R.permute_dims(lv, axes=[1, 0])
            m = R.match_cast(params[1], R.Tensor(("m",), "float32"))
            s = R.match_cast(lv1, R.Tensor((3, 2), "float32"))
            gv = (lv1,)
            R.output(gv)
        loaded = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        return gv

    @T.prim_func
    def copy(a: T.Buffer((2, 3), "float32"), b: T.Buffer((2, 3), "float32")):
        for i, j in T.grid(2, 3):
            with T.block("copy"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vi, vj]


def test_dead_pure_bindings_and_unused_kernels_are_removed() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor(("n",), "float32")),
        ) -> R.Tuple(R.Tensor((3, 2), "float32")):
            n = T.int64()
            with R.dataflow():
                lv = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                m = R.match_cast(params[1], R.Tensor(("m",), "float32"))
                gv = (lv1,)
                R.output(gv)
            loaded = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            return gv

    check_pass(DeadCodeElimination(), WithKernels, Expected)


def test_entry_functions_decide_what_is_reachable() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

        @R.function
        def helper(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            y = R.add(x, x)
            return y

        @R.function
        def caller(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            y = Before.helper(x)
            return y

    assert DeadCodeElimination()(Before).names() == ["main", "helper", "caller"]
    assert DeadCodeElimination(["caller"])(Before).names() == ["helper", "caller"]
    assert DeadCodeElimination(["main"])(Before).names() == ["main"]
    with pytest.raises(TransformError, match=r"expected an entry function in .*, got 'nope'"):
        DeadCodeElimination(["nope"])(Before)
    with pytest.raises(TransformError, match="expected a list of function names"):
        DeadCodeElimination("main")


def test_calls_of_impure_functions_stay() -> None:
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def effect(x: R.Tensor((2,), "float32")) -> R.Object:
            y = R.call_packed("log", x, sinfo_args=(R.Object,))
            return y

        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            y = Before.effect(x)
            z = R.add(x, x)
            return x

    after = DeadCodeElimination()(Before)
    assert_well_formed(after)
    assert [b.var.name_hint for b in after["main"].bindings()] == ["y"]


def test_a_module_of_kernels_only_keeps_them() -> None:
    kernels = WithKernels.without_function("main_transform_params")
    assert DeadCodeElimination()(kernels).names() == ["copy"]
    assert DeadCodeElimination(["copy"])(kernels).names() == ["copy"]
