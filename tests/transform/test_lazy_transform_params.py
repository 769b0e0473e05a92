"""LazyTransformParams beyond the seed: one Before/Expected pair per output and input shape.

Each result is compared structurally, checked by well_formed, printed and parsed back, and run
on the VM against the original function, output bits and single loads included.
"""

from __future__ import annotations

import numpy as np

from lazyparams.ir import MatchCast, ObjectStructInfo, TensorStructInfo, Var
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams
from tests.transform.harness import (
    FUNC,
    assert_well_formed,
    check_kills,
    check_pass,
    compare_lazy,
    extern_calls,
    run_eager,
    run_lazy,
    same_bits,
)


def _loads_killed(after: object) -> None:
    func = after[FUNC]  # type: ignore[index]
    loads = {b.var for b in extern_calls(func, "get_item")}
    check_kills(func, lambda v: v in loads)


def test_same_value_at_several_output_indices() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32")),
        ) -> R.Tuple(R.Tensor((3, 2), "float32"), R.Tensor((3, 2), "float32")):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1, lv1)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv2 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv3 = R.call_packed("set_item", R.prim_value(1), lv1, sinfo_args=(R.Object,))
                lv4 = R.vm.kill_object(lv)
                gv = (lv2, lv3)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_constant_and_prim_value_outputs() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2,), "float32") = params[0]
                lv1 = R.add(lv, lv)
                gv = (lv1, R.const([1.5, 2.5], "float32"), R.prim_value(7))
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object, R.Object):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2,), "float32"),
                )
                lv1 = R.add(lv, lv)
                lv2 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv3 = R.vm.kill_object(lv)
                lv4 = R.call_packed(
                    "set_item",
                    R.prim_value(1),
                    R.const([1.5, 2.5], "float32"),
                    sinfo_args=(R.Object,),
                )
                lv5 = R.call_packed(
                    "set_item", R.prim_value(2), R.prim_value(7), sinfo_args=(R.Object,)
                )
                gv = (lv2, lv4, lv5)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_output_value_used_by_later_bindings() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv2 = R.astype(lv1, "float16")
                gv = (lv1, lv2)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv3 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv4 = R.vm.kill_object(lv)
                lv2 = R.astype(lv1, "float16")
                lv5 = R.call_packed("set_item", R.prim_value(1), lv2, sinfo_args=(R.Object,))
                gv = (lv3, lv5)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_input_passed_straight_through() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((4,), "float16")),
        ):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1, params[1], lv)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object, R.Object):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv2 = R.call_packed("set_item", R.prim_value(2), lv, sinfo_args=(R.Object,))
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv3 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv4 = R.vm.kill_object(lv)
                params_1 = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
                lv5 = R.call_packed("set_item", R.prim_value(1), params_1, sinfo_args=(R.Object,))
                lv6 = R.vm.kill_object(params_1)
                gv = (lv3, lv5, lv2)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_inline_output_tuple_without_dataflow() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((4,), "float32")),
        ):
            lv: R.Tensor((2, 3), "float32") = params[0]
            lv1 = R.permute_dims(lv, axes=[1, 0])
            return (lv1, params[1])

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            lv = R.match_cast(
                R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                R.Tensor((2, 3), "float32"),
            )
            lv1 = R.permute_dims(lv, axes=[1, 0])
            lv2 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
            lv3 = R.vm.kill_object(lv)
            params_1 = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
            lv4 = R.call_packed("set_item", R.prim_value(1), params_1, sinfo_args=(R.Object,))
            lv5 = R.vm.kill_object(params_1)
            return (lv2, lv4)

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_inline_output_tuple_after_a_dataflow_block() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                lv = R.permute_dims(params[0], axes=[1, 0])
                gv = R.astype(lv, "float16")
                R.output(gv)
            return (gv, R.prim_value(3))

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                params_0 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv = R.permute_dims(params_0, axes=[1, 0])
                lv1 = R.vm.kill_object(params_0)
                gv = R.astype(lv, "float16")
                lv2 = R.call_packed("set_item", R.prim_value(0), gv, sinfo_args=(R.Object,))
                R.output(gv, lv2)
            lv3 = R.call_packed(
                "set_item", R.prim_value(1), R.prim_value(3), sinfo_args=(R.Object,)
            )
            return (lv2, lv3)

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_single_non_tuple_output() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32")),
        ) -> R.Tensor((3, 2), "float32"):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                gv = R.permute_dims(lv, axes=[1, 0])
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Object:
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                gv = R.permute_dims(lv, axes=[1, 0])
                gv1 = R.call_packed("set_item", R.prim_value(0), gv, sinfo_args=(R.Object,))
                lv1 = R.vm.kill_object(lv)
                R.output(gv, gv1)
            return gv1

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_unpacked_weights_after_runtime_inputs() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            x: R.Tensor((3,), "float32"),
            w0: R.Tensor((3,), "float32"),
            w1: R.Tensor((2, 3), "float32"),
        ):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                lv = R.add(x, w0)
                lv1 = R.call_tir(Before.transpose, (w1,), out_sinfo=R.Tensor((3, 2), "float32"))
                gv = (lv, lv1, x)
                R.output(gv)
            return gv

        @T.prim_func
        def transpose(a: T.Buffer((2, 3), "float32"), b: T.Buffer((3, 2), "float32")):
            for i, j in T.grid(3, 2):
                with T.block("t"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    b[vi, vj] = a[vj, vi]

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            x: R.Tensor((3,), "float32"),
        ) -> R.Tuple(R.Object, R.Object, R.Object):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                # a runtime input returned as it is leaves first, as TVM hands it off
                lv6 = R.call_packed("set_item", R.prim_value(2), x, sinfo_args=(R.Object,))
                w0 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((3,), "float32"),
                )
                lv = R.add(x, w0)
                lv2 = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
                lv3 = R.vm.kill_object(w0)
                w1 = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
                lv1 = R.call_tir(Expected.transpose, (w1,), out_sinfo=R.Tensor((3, 2), "float32"))
                lv4 = R.call_packed("set_item", R.prim_value(1), lv1, sinfo_args=(R.Object,))
                lv5 = R.vm.kill_object(w1)
                gv = (lv2, lv4, lv6)
                R.output(gv)
            return gv

        @T.prim_func
        def transpose(a: T.Buffer((2, 3), "float32"), b: T.Buffer((3, 2), "float32")):
            for i, j in T.grid(3, 2):
                with T.block("t"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    b[vi, vj] = a[vj, vi]

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after, runtime=(np.arange(3, dtype="float32"),))


def test_symbolic_dims_are_defined_by_a_match_cast_after_the_load() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor(("n", 4), "float32"), R.Tensor((4, "n"), "float32")),
        ) -> R.Tuple(R.Tensor((4, "n"), "float32")):
            n = T.int64()
            with R.dataflow():
                lv = R.permute_dims(params[0], axes=[1, 0])
                lv1 = R.add(lv, params[1])
                gv = (lv1,)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object):
            n = T.int64()
            with R.dataflow():
                params_0 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((n, 4), "float32"),
                )
                lv = R.permute_dims(params_0, axes=[1, 0])
                lv2 = R.vm.kill_object(params_0)
                params_1 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
                    R.Tensor((4, n), "float32"),
                )
                lv1 = R.add(lv, params_1)
                lv3 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv4 = R.vm.kill_object(params_1)
                gv = (lv3,)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    weights = (np.ones((5, 4), "float32"), np.full((4, 5), 2.0, "float32"))
    store, _ = run_lazy(after, weights)
    assert same_bits(store.output_tuple(), run_eager(Before, weights))


def test_a_symbolic_dim_used_before_any_read_loads_its_weight_first() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor(("n",), "float32"))):
            n = T.int64()
            with R.dataflow():
                lv = R.zeros(R.shape([n]), "float32")
                lv1 = R.add(lv, params[0])
                gv = (lv1,)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object):
            n = T.int64()
            with R.dataflow():
                params_0 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((n,), "float32"),
                )
                lv = R.zeros(R.shape([n]), "float32")
                lv1 = R.add(lv, params_0)
                lv2 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv3 = R.vm.kill_object(params_0)
                gv = (lv2,)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)


def test_get_only_mode_returns_outputs_and_still_frees_loads() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3,), "float32")),
        ) -> R.Tuple(R.Tensor((3, 2), "float32"), R.Tensor((3,), "float32")):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1: R.Tensor((3,), "float32") = params[1]
                lv2 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv2, lv1)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(
            R.Tensor((3, 2), "float32"), R.Tensor((3,), "float32")
        ):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv1 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
                    R.Tensor((3,), "float32"),
                )
                lv2 = R.permute_dims(lv, axes=[1, 0])
                lv3 = R.vm.kill_object(lv)
                gv = (lv2, lv1)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(fset_item=None), Before, Expected)
    check_kills(after[FUNC])
    store = compare_lazy(Before, after, returns=True)
    assert store.outputs == {}


def test_extra_params_are_passed_before_the_index() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1,)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(loader: R.Object, saver: R.Object) -> R.Tuple(R.Object):
            R.func_attr({"num_input": 2})
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", loader, R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv2 = R.call_packed("set_item", saver, R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv3 = R.vm.kill_object(lv)
                gv = (lv2,)
                R.output(gv)
            return gv

    loader, saver = Var("loader", R.Object), Var("saver", R.Object)
    lazy = LazyTransformParams(extra_get_item_params=[loader], extra_set_item_params=[saver])
    after = check_pass(lazy, Before, Expected)
    assert after[FUNC].params == (loader, saver)
    compare_lazy(Before, after, lazy_args=("the loader", "the saver"))


def test_param_read_twice_is_loaded_once() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv2: R.Tensor((2, 3), "float32") = params[0]
                lv3 = R.multiply(lv2, params[0])
                gv = (lv1, lv3)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                lv = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv4 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                lv3 = R.multiply(lv, lv)
                lv5 = R.call_packed("set_item", R.prim_value(1), lv3, sinfo_args=(R.Object,))
                lv6 = R.vm.kill_object(lv)
                gv = (lv4, lv5)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    store = compare_lazy(Before, after)
    assert store.loads == [0]


def test_a_weight_read_in_two_blocks_is_loaded_into_a_visible_var() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                gv = R.permute_dims(params[0], axes=[1, 0])
                R.output(gv)
            lv = R.astype(params[0], "float16")
            return (gv, lv)

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                params_0 = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((2, 3), "float32"),
                )
                gv = R.permute_dims(params_0, axes=[1, 0])
                lv1 = R.call_packed("set_item", R.prim_value(0), gv, sinfo_args=(R.Object,))
                R.output(params_0, gv, lv1)
            lv = R.astype(params_0, "float16")
            lv2 = R.call_packed("set_item", R.prim_value(1), lv, sinfo_args=(R.Object,))
            lv3 = R.vm.kill_object(params_0)
            return (lv1, lv2)

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_an_unused_load_is_freed_at_once() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2,), "float32")),
        ):
            lv: R.Tensor((2,), "float32") = params[0]
            lv1: R.Tensor((2,), "float32") = params[1]
            lv2 = R.add(lv1, lv1)
            return (lv2,)

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params() -> R.Tuple(R.Object):
            lv = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            lv3 = R.vm.kill_object(lv)
            lv1 = R.match_cast(
                R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
                R.Tensor((2,), "float32"),
            )
            lv2 = R.add(lv1, lv1)
            lv4 = R.call_packed("set_item", R.prim_value(0), lv2, sinfo_args=(R.Object,))
            lv5 = R.vm.kill_object(lv1)
            return (lv4,)

    after = check_pass(LazyTransformParams(), Before, Expected)
    _loads_killed(after)
    compare_lazy(Before, after)


def test_set_only_mode_keeps_the_weights_as_params() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                gv = (lv1,)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32")),
        ) -> R.Tuple(R.Object):
            with R.dataflow():
                lv: R.Tensor((2, 3), "float32") = params[0]
                lv1 = R.permute_dims(lv, axes=[1, 0])
                lv2 = R.call_packed("set_item", R.prim_value(0), lv1, sinfo_args=(R.Object,))
                gv = (lv2,)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(fget_item=None), Before, Expected)
    weights = (np.arange(6, dtype="float32").reshape(2, 3),)
    store, _ = run_lazy(after, weights, (weights,))
    assert same_bits(store.output_tuple(), run_eager(Before, weights))


def test_only_transform_functions_or_the_named_ones_change() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

        @R.function
        def embed_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            return (params[0],)

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return x

        @R.function
        def embed_transform_params() -> R.Tuple(R.Object):
            params_0 = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            lv = R.call_packed("set_item", R.prim_value(0), params_0, sinfo_args=(R.Object,))
            lv1 = R.vm.kill_object(params_0)
            return (lv,)

    check_pass(LazyTransformParams(), Before, Expected)
    named = LazyTransformParams(func_names=["main"])(Before)
    assert_well_formed(named)
    assert isinstance(named["main"].ret_struct_info, ObjectStructInfo)
    assert named["embed_transform_params"] is Before["embed_transform_params"]


def test_extra_params_are_copied_for_a_second_function() -> None:
    @I.ir_module
    class Before:
        @R.function
        def a_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            return (params[0],)

        @R.function
        def b_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            return (params[0],)

    loader = Var("loader", R.Object)
    after = LazyTransformParams(extra_get_item_params=[loader])(Before)
    first, second = after["a_transform_params"].params, after["b_transform_params"].params
    assert first == (loader,)
    assert second[0] is not loader and second[0].name_hint == "loader"
    check_pass(LazyTransformParams(extra_get_item_params=[loader]), Before, after)


def test_typed_load_keeps_the_param_struct_info() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float16"))):
            lv = R.astype(params[0], "float32")
            return (lv,)

    after = LazyTransformParams()(Before)
    assert_well_formed(after)
    first = after[FUNC].bindings()[0]
    assert isinstance(first, MatchCast)
    assert first.var.struct_info == TensorStructInfo((2, 3), "float16")
    compare_lazy(Before, after)
