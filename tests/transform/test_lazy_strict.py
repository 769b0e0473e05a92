"""The checked form of the lazy passes: every load is match_cast to its weight's struct info, a
wrong weight is refused naming its index and both shapes and dtypes, and a function given
impure calls is marked impure, holds no dataflow block and passes `well_formed` as it is."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.errors import RuntimeExecError, TransformError, WellFormedError
from lazyparams.ir import DataflowBlock, Function, IRModule, MatchCast, ObjectStructInfo
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyGetInput, LazyTransformParams, standard_pipeline
from tests.script.seed_modules import Before as SeedBefore
from tests.transform.harness import (
    FUNC,
    Store,
    check_pass,
    compare_lazy,
    extern_calls,
    run_lazy,
)

STRICT = LazyTransformParams(strict=True)


def _assert_strict(mod: IRModule) -> Function:
    """The function is impure, holds no dataflow block and passes `well_formed` as it is."""
    well_formed(mod)
    func = mod[FUNC]
    assert isinstance(func, Function) and not func.is_pure
    assert not any(isinstance(block, DataflowBlock) for block in func.body.blocks)
    return func


def test_the_seed_module_in_the_checked_form() -> None:
    @I.ir_module
    class Expected:
        @T.prim_func
        def transform_layout_IOHW_to_OIHW(
            w1: T.Buffer((3, 16, 3, 3), "float32"), out: T.Buffer((16, 3, 3, 3), "float32")
        ):
            for ax0, ax1, ax2, ax3 in T.grid(16, 3, 3, 3):
                with T.block("layout_transform"):
                    o, i, h, w = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                    T.reads(w1[i, o, h, w])
                    T.writes(out[o, i, h, w])
                    out[o, i, h, w] = w1[i, o, h, w]

        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            cls = Expected
            lv = R.match_cast(
                R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
                R.Tensor((16, 16, 3, 3), dtype="float32"),
            )
            lv1 = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
            lv2 = R.vm.kill_object(lv)
            lv1_1 = R.match_cast(
                R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                R.Tensor((3, 16, 3, 3), dtype="float32"),
            )
            lv3 = R.call_tir(
                cls.transform_layout_IOHW_to_OIHW,
                (lv1_1,),
                out_sinfo=R.Tensor((16, 3, 3, 3), dtype="float32"),
            )
            lv4 = R.call_packed("set_item", R.prim_value(1), lv3, sinfo_args=(R.Object,))
            lv5 = R.vm.kill_object(lv1_1)
            gv = (lv1, lv4)
            return gv

    after = check_pass(STRICT, SeedBefore, Expected)
    _assert_strict(after)
    compare_lazy(SeedBefore, after)


def test_the_default_is_the_seed_form_which_fails_the_purity_rule() -> None:
    after = LazyTransformParams()(SeedBefore)
    func = after[FUNC]
    assert isinstance(func, Function) and func.is_pure
    assert not any(isinstance(b, MatchCast) for b in func.bindings())
    with pytest.raises(
        WellFormedError, match=r"impure call R.call_packed\(\"get_item\"\) inside a dataflow block"
    ):
        well_formed(after)
    well_formed(after, check_purity=False)


def _seed_weights(**replace: Any) -> list[np.ndarray[Any, Any]]:
    weights = [np.ones((3, 16, 3, 3), "float32"), np.ones((16, 16, 3, 3), "float32")]
    for index, value in replace.items():
        weights[int(index[1:])] = value
    return weights


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"w1": np.ones((7,), "float32")},
            r"match_cast of get_item\(1\): expected R.Tensor\(\(16, 16, 3, 3\), \"float32\"\), "
            r"got float32 array of shape \(7,\)",
        ),
        (
            {"w0": np.ones((3, 16, 3, 3), "int8")},
            r"match_cast of get_item\(0\): expected R.Tensor\(\(3, 16, 3, 3\), \"float32\"\), "
            r"got int8 array of shape \(3, 16, 3, 3\)",
        ),
    ],
)
def test_a_wrong_weight_is_refused_naming_its_index(bad: dict[str, Any], message: str) -> None:
    """A weight passed straight through (1) or fed only to call_tir (0) is still checked."""
    after = STRICT(SeedBefore)
    store = Store(tuple(_seed_weights(**bad)))
    vm = VirtualMachine(after, {"get_item": store.get_item, "set_item": store.set_item})
    with pytest.raises(RuntimeExecError, match=message):
        vm[FUNC]()
    assert 1 not in store.outputs  # the wrong pass-through weight never reached set_item


def test_the_seed_form_lets_a_wrong_pass_through_weight_reach_set_item() -> None:
    """What the checked form is for: unchecked, the (7,) weight is handed off silently."""
    weights = tuple(_seed_weights(w1=np.ones((7,), "float32")))
    store, _ = run_lazy(LazyTransformParams()(SeedBefore), weights)
    assert store.outputs[0].shape == (7,)


def _pass_through() -> IRModule:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((4,), "float16")),
        ):
            with R.dataflow():
                lv = R.permute_dims(params[0], axes=[1, 0])
                gv = (lv, params[1])
                R.output(gv)
            return gv

    return Before


def test_get_only_checked_form_is_impure_and_returns_the_outputs() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(
            R.Tensor((3, 2), "float32"), R.Tensor((4,), "float16")
        ):
            lv = R.match_cast(
                R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                R.Tensor((2, 3), "float32"),
            )
            lv1 = R.permute_dims(lv, axes=[1, 0])
            lv2 = R.vm.kill_object(lv)
            lv3 = R.match_cast(
                R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
                R.Tensor((4,), "float16"),
            )
            gv = (lv1, lv3)
            return gv

    before = _pass_through()
    after = check_pass(LazyTransformParams(fset_item=None, strict=True), before, Expected)
    _assert_strict(after)
    compare_lazy(before, after, returns=True)


def test_set_only_checked_form_is_impure() -> None:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((4,), "float16")),
        ) -> R.Tuple(R.Object, R.Object):
            lv = R.permute_dims(params[0], axes=[1, 0])
            lv1 = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
            lv2 = params[1]
            lv3 = R.call_packed("set_item", R.prim_value(1), lv2, sinfo_args=(R.Object,))
            gv = (lv1, lv3)
            return gv

    after = check_pass(LazyTransformParams(fget_item=None, strict=True), _pass_through(), Expected)
    _assert_strict(after)


def test_a_function_given_no_impure_call_keeps_its_purity_and_dataflow() -> None:
    """Impure exactly when an impure call was inserted: no weights and no hand-offs, no change
    of purity."""

    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                gv = R.add(x, x)
                R.output(gv)
            return gv

    after = check_pass(LazyTransformParams(fset_item=None, strict=True), Before, Before)
    func = after[FUNC]
    assert isinstance(func, Function) and func.is_pure
    well_formed(after)


def test_lazy_get_input_checks_every_load() -> None:
    after = LazyGetInput()(SeedBefore)
    well_formed(after)
    func = after[FUNC]
    assert isinstance(func, Function)
    casts = [b for b in func.bindings() if isinstance(b, MatchCast)]
    assert len(casts) == 2 and all(not isinstance(c.struct_info, ObjectStructInfo) for c in casts)
    weights = _seed_weights(w1=np.ones((16, 16, 3, 3), "float16"))
    with pytest.raises(RuntimeExecError, match=r"fget_param\(1, 'params_1'\): expected"):
        VirtualMachine(after)[FUNC](lambda i, name: weights[i])


def test_the_standard_pipeline_output_is_checked_and_well_formed() -> None:
    after = standard_pipeline()(SeedBefore)
    func = _assert_strict(after)
    loads = extern_calls(func, "get_item")
    assert loads and all(isinstance(b, MatchCast) for b in loads)
    compare_lazy(SeedBefore, after)


def test_strict_must_be_a_bool() -> None:
    with pytest.raises(TransformError, match="expected strict to be True or False, got 'yes'"):
        LazyTransformParams(strict="yes")  # type: ignore[arg-type]
