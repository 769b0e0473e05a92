"""TVM's LazyTransformParams scenarios in the checked form, Before -> Expected: each weight is
loaded at its first use and checked by a match_cast, each output handed to set_item where it is
defined, each load freed after its last use, and the function marked impure."""

from __future__ import annotations

import pytest

from lazyparams.ir import IRModule
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams
from tests.transform.harness import check_pass
from tests.transform.test_lazy_tvm_scenarios import SCENARIOS


@I.ir_module
class ExpectedConstOutput:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object, R.Object):
        params_0: R.Tensor((3,), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((3,), dtype="float32"),
        )
        lv: R.Tensor((3,), dtype="float32") = R.add(params_0, params_0)
        lv_1: R.Object = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
        lv_4: R.Tuple = R.vm.kill_object(params_0)
        lv_2: R.Object = R.call_packed(
            "set_item", R.prim_value(1), R.const([1.0, 2.0], "float32"), sinfo_args=(R.Object,)
        )
        lv_3: R.Object = R.call_packed(
            "set_item", R.prim_value(2), R.prim_value(7), sinfo_args=(R.Object,)
        )
        gv: R.Tuple(R.Object, R.Object, R.Object) = (lv_1, lv_2, lv_3)
        return gv


@I.ir_module
class ExpectedDuplicateOutputs:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object, R.Object):
        param0: R.Tensor((16,), dtype="int32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((16,), dtype="int32"),
        )
        param1: R.Tensor((16,), dtype="int32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
            R.Tensor((16,), dtype="int32"),
        )
        transformed0: R.Tensor((16,), dtype="int32") = R.add(param0, R.const(1, "int32"))
        lv: R.Object = R.call_packed(
            "set_item", R.prim_value(0), transformed0, sinfo_args=(R.Object,)
        )
        lv_1: R.Object = R.call_packed(
            "set_item", R.prim_value(2), transformed0, sinfo_args=(R.Object,)
        )
        lv_3: R.Tuple = R.vm.kill_object(param0)
        transformed1: R.Tensor((16,), dtype="int32") = R.add(param1, R.const(2, "int32"))
        lv_2: R.Object = R.call_packed(
            "set_item", R.prim_value(1), transformed1, sinfo_args=(R.Object,)
        )
        lv_4: R.Tuple = R.vm.kill_object(param1)
        output: R.Tuple(R.Object, R.Object, R.Object) = (lv, lv_2, lv_1)
        return output


@I.ir_module
class ExpectedSymbolicOutput:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        ic = T.int64()
        param0: R.Tensor((3, ic, 3, 3), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((3, ic, 3, 3), dtype="float32"),
        )
        param1: R.Tensor((16, 16, 3, 3), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
            R.Tensor((16, 16, 3, 3), dtype="float32"),
        )
        lv: R.Object = R.call_packed("set_item", R.prim_value(1), param1, sinfo_args=(R.Object,))
        lv_2: R.Tuple = R.vm.kill_object(param1)
        transformed0: R.Tensor((ic, 3, 3, 3), dtype="float32") = R.permute_dims(
            param0, axes=[1, 0, 2, 3]
        )
        lv_1: R.Object = R.call_packed(
            "set_item", R.prim_value(0), transformed0, sinfo_args=(R.Object,)
        )
        lv_3: R.Tuple = R.vm.kill_object(param0)
        transformed: R.Tuple(R.Object, R.Object) = (lv_1, lv)
        return transformed


@I.ir_module
class ExpectedOutputWithUseSite:
    @T.prim_func
    def copy(x: T.Buffer((), "float32"), y: T.Buffer((), "float32")):
        with T.block("block"):
            T.reads(x[()])
            T.writes(y[()])
            y[()] = x[()]

    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        cls = ExpectedOutputWithUseSite
        x: R.Tensor((), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((), dtype="float32"),
        )
        y: R.Tensor((), dtype="float32") = R.call_tir(
            cls.copy, (x,), out_sinfo=R.Tensor((), dtype="float32")
        )
        lv: R.Object = R.call_packed("set_item", R.prim_value(0), y, sinfo_args=(R.Object,))
        lv_2: R.Tuple = R.vm.kill_object(x)
        z: R.Tensor((), dtype="float32") = R.call_tir(
            cls.copy, (y,), out_sinfo=R.Tensor((), dtype="float32")
        )
        lv_1: R.Object = R.call_packed("set_item", R.prim_value(1), z, sinfo_args=(R.Object,))
        gv: R.Tuple(R.Object, R.Object) = (lv, lv_1)
        return gv


@I.ir_module
class ExpectedParamsWithoutTuple:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        A: R.Tensor((16, 16), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((16, 16), dtype="float32"),
        )
        C: R.Tensor((16, 16), dtype="float32") = R.multiply(A, R.const(2.0, "float32"))
        lv_2: R.Tuple = R.vm.kill_object(A)
        B: R.Tensor((16, 16), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
            R.Tensor((16, 16), dtype="float32"),
        )
        lv: R.Object = R.call_packed("set_item", R.prim_value(1), B, sinfo_args=(R.Object,))
        D: R.Tensor((16, 16), dtype="float32") = R.add(C, B)
        lv_1: R.Object = R.call_packed("set_item", R.prim_value(0), D, sinfo_args=(R.Object,))
        lv_3: R.Tuple = R.vm.kill_object(B)
        return (lv_1, lv)


@I.ir_module
class ExpectedUntypedParam:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object):
        A: R.Object = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        lv: R.Object = R.call_packed("set_item", R.prim_value(0), A, sinfo_args=(R.Object,))
        lv_1: R.Tuple = R.vm.kill_object(A)
        return (lv,)


EXPECTED: dict[str, IRModule] = {
    "const_output": ExpectedConstOutput,
    "duplicate_outputs": ExpectedDuplicateOutputs,
    "output_with_symbolic_dim": ExpectedSymbolicOutput,
    "output_with_use_site": ExpectedOutputWithUseSite,
    "params_without_tuple": ExpectedParamsWithoutTuple,
    "untyped_param": ExpectedUntypedParam,
}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_tvm_scenario_before_and_expected(scenario: str) -> None:
    before, _ = SCENARIOS[scenario]
    check_pass(LazyTransformParams(strict=True), before, EXPECTED[scenario])
