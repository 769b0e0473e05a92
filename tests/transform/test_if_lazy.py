"""The lazy passes on a transform with an If: the weights its branches read are loaded once,
before it, and every output is handed off after the binding defining it; Before/Expected, our
VM for both conditions, and TVM's VM on our output (the `tvm` extra) giving our values."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.analysis import estimate_peak_memory, well_formed
from lazyparams.errors import TransformError
from lazyparams.ir import Function, IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    LazyGetInput,
    LazySetOutput,
    LazyTransformParams,
    Pass,
    standard_pipeline,
)
from tests.transform.harness import FUNC, Store, check_pass, same_bits


@I.ir_module
class Before:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Tensor((), "bool")),
    ) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        cond = params[2]
        a = params[0]
        if cond:
            b = params[1]
            w = R.add(a, b)
        else:
            w = R.multiply(a, a)
        c = R.add(w, a)
        out = (w, c)
        return out


@I.ir_module
class ExpectedStrict:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        cond = R.match_cast(
            R.call_packed("get_item", R.prim_value(2), sinfo_args=(R.Object,)),
            R.Tensor((), dtype="bool"),
        )
        a = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((4,), dtype="float32"),
        )
        params_1 = R.match_cast(
            R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,)),
            R.Tensor((4,), dtype="float32"),
        )
        if cond:
            b = params_1
            w = R.add(a, b)
        else:
            w = R.multiply(a, a)
        lv = R.call_packed("set_item", R.prim_value(0), w, sinfo_args=(R.Object,))
        _1 = R.vm.kill_object(cond)
        _2 = R.vm.kill_object(params_1)
        c = R.add(w, a)
        lv_1 = R.call_packed("set_item", R.prim_value(1), c, sinfo_args=(R.Object,))
        _3 = R.vm.kill_object(a)
        out = (lv, lv_1)
        return out


@I.ir_module
class ExpectedGetInput:
    @R.function(pure=False)
    def main_transform_params(
        fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
    ) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        R.func_attr({"num_input": 1})
        cond = R.match_cast(fget_param(R.prim_value(2), R.str("params_2")), R.Tensor((), "bool"))
        a = R.match_cast(fget_param(R.prim_value(0), R.str("params_0")), R.Tensor((4,), "float32"))
        params_1 = R.match_cast(
            fget_param(R.prim_value(1), R.str("params_1")), R.Tensor((4,), "float32")
        )
        if cond:
            b = params_1
            w = R.add(a, b)
        else:
            w = R.multiply(a, a)
        c = R.add(w, a)
        out = (w, c)
        return out


@I.ir_module
class ExpectedSetOutput:
    @R.function(pure=False)
    def main_transform_params(
        params: R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32"), R.Tensor((), "bool")),
        fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
    ) -> R.Tuple:
        cond = params[2]
        a = params[0]
        if cond:
            b = params[1]
            w = R.add(a, b)
        else:
            w = R.multiply(a, a)
        lv = fset_output(R.prim_value(0), w)
        c = R.add(w, a)
        lv_1 = fset_output(R.prim_value(1), c)
        return ()


def _weights(cond: bool) -> tuple[np.ndarray, ...]:
    return (np.arange(4, dtype=np.float32), np.full(4, 3, np.float32), np.array(cond))


def _expected(cond: bool) -> tuple[np.ndarray, ...]:
    result = VirtualMachine(Before)[FUNC](_weights(cond))
    assert isinstance(result, tuple)
    return result


def _lazy_outputs(pass_: Pass, after: IRModule, cond: bool) -> tuple[np.ndarray, ...]:
    """What the pass's output hands off (or returns) when run on the weights."""
    store = Store(_weights(cond))
    vm = VirtualMachine(after, {"get_item": store.get_item, "set_item": store.set_item})
    if isinstance(pass_, LazyGetInput):
        result = vm[FUNC](store.get_item)
        assert isinstance(result, tuple) and sorted(store.loads) == [0, 1, 2]
        return result
    if isinstance(pass_, LazySetOutput):
        vm[FUNC](_weights(cond), store.set_item)
    else:
        vm[FUNC]()
        assert sorted(store.loads) == [0, 1, 2]  # each weight once, whichever branch runs
    return store.output_tuple()


@pytest.mark.parametrize(
    ("pass_", "expected"),
    [
        (LazyTransformParams(strict=True), ExpectedStrict),
        (LazyGetInput(), ExpectedGetInput),
        (LazySetOutput(), ExpectedSetOutput),
    ],
    ids=["lazy-transform-params", "lazy-get-input", "lazy-set-output"],
)
def test_the_lazy_pass_rewrites_reads_inside_the_branches(pass_: Pass, expected: IRModule) -> None:
    after = check_pass(pass_, Before, expected)
    for cond in (True, False):
        assert same_bits(_lazy_outputs(pass_, after, cond), _expected(cond))
    assert not same_bits(_expected(True), _expected(False))


def test_the_seed_form_loads_the_weights_a_branch_reads_typed() -> None:
    after = LazyTransformParams()(Before)
    strict = LazyTransformParams(strict=True)(Before)
    assert after.script().replace("@R.function\n", "@R.function(pure=False)\n", 1) == (
        strict.script()
    )


@pytest.mark.parametrize("cond", [True, False])
def test_tvm_s_vm_runs_our_lazy_output_to_our_values(cond: bool) -> None:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    from tests.transform.test_lazy_tvm_round_trip import _tvm_run

    ours = LazyTransformParams(strict=True)(Before)
    got = _tvm_run(tvm, ours.script(flavor="tvm"), _weights(cond))
    expected = _lazy_outputs(LazyTransformParams(), ours, cond)
    assert sorted(got) == [0, 1]
    for index, value in enumerate(expected):
        np.testing.assert_array_equal(got[index], value)
        assert got[index].dtype == value.dtype


@pytest.mark.parametrize("cond", [True, False])
def test_the_standard_pipeline_runs_it_and_the_memory_plan_refuses_it(cond: bool) -> None:
    lazy = standard_pipeline(func_names=[FUNC])(Before)
    well_formed(lazy)
    assert same_bits(_lazy_outputs(LazyTransformParams(), lazy, cond), _expected(cond))
    func = lazy[FUNC]
    assert isinstance(func, Function)
    with pytest.raises(TransformError, match=r"\(w\) is an if/else, whose peak depends on the"):
        estimate_peak_memory(func)
