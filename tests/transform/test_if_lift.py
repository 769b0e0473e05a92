"""LiftTransformParams on TVM's test_condition: the If binding stays in the model function and
the weights it reads, the condition included, become its params; on the VM the lifted pair
computes what the original computes for both values of the condition."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import LazyTransformParams, LiftTransformParams
from tests.transform.harness import Store, check_pass, same_bits
from tests.transform.lift_scenarios import Condition


@I.ir_module
class Expected:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((16, 16, 3, 3), dtype="float32"),
            R.Tensor((16, 16, 3, 3), dtype="float32"),
            R.Tensor((), dtype="bool"),
        ),
    ) -> R.Tuple(
        R.Tensor((16, 16, 3, 3), dtype="float32"),
        R.Tensor((16, 16, 3, 3), dtype="float32"),
        R.Tensor((), dtype="bool"),
    ):
        R.func_attr({"num_input": 0})
        return params

    @R.function
    def main(
        x: R.Tensor((1, 16, 224, 224), "float32"),
        param0: R.Tensor((16, 16, 3, 3), dtype="float32"),
        param1: R.Tensor((16, 16, 3, 3), dtype="float32"),
        param2: R.Tensor((), dtype="bool"),
    ) -> R.Tensor((1, 16, 224, 224), "float32"):
        R.func_attr({"num_input": 1})
        if param2:
            w: R.Tensor((16, 16, 3, 3), dtype="float32") = param0
        else:
            w: R.Tensor((16, 16, 3, 3), dtype="float32") = param1
        with R.dataflow():
            conv1 = R.nn.conv2d(x, w, padding=(1, 1), data_layout="NCHW", kernel_layout="OIHW")
            R.output(conv1)
        return conv1


def test_condition() -> None:
    check_pass(LiftTransformParams(), Condition, Expected)


@I.ir_module
class Small:
    """test_condition at a size the VM runs quickly, with weight work around the If."""

    @R.function
    def main(
        x: R.Tensor((1, 2, 6, 6), "float32"),
        w1: R.Tensor((2, 2, 3, 3), "float32"),
        w2: R.Tensor((2, 2, 3, 3), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((1, 2, 6, 6), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            doubled = R.add(w2, w2)
            R.output(doubled)
        if cond:
            w = w1
        else:
            w = doubled
        with R.dataflow():
            conv1 = R.nn.conv2d(x, w, padding=(1, 1), data_layout="NCHW", kernel_layout="OIHW")
            R.output(conv1)
        return conv1


@I.ir_module
class SmallExpected:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((2, 2, 3, 3), dtype="float32"),
            R.Tensor((2, 2, 3, 3), dtype="float32"),
            R.Tensor((), dtype="bool"),
        ),
    ) -> R.Tuple(
        R.Tensor((2, 2, 3, 3), dtype="float32"),
        R.Tensor((), dtype="bool"),
        R.Tensor((2, 2, 3, 3), dtype="float32"),
    ):
        R.func_attr({"num_input": 0})
        with R.dataflow():
            w2 = params[1]
            doubled = R.add(w2, w2)
            w1 = params[0]
            cond = params[2]
            gv = (w1, cond, doubled)
            R.output(gv)
        return gv

    @R.function
    def main(
        x: R.Tensor((1, 2, 6, 6), "float32"),
        w1: R.Tensor((2, 2, 3, 3), dtype="float32"),
        cond: R.Tensor((), dtype="bool"),
        doubled: R.Tensor((2, 2, 3, 3), dtype="float32"),
    ) -> R.Tensor((1, 2, 6, 6), "float32"):
        R.func_attr({"num_input": 1})
        if cond:
            w = w1
        else:
            w = doubled
        with R.dataflow():
            conv1 = R.nn.conv2d(x, w, padding=(1, 1), data_layout="NCHW", kernel_layout="OIHW")
            R.output(conv1)
        return conv1


def _inputs(cond: bool) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    w1, w2 = (rng.standard_normal((2, 2, 3, 3)).astype(np.float32) for _ in range(2))
    return x, (w1, w2, np.array(cond))


def test_weight_work_beside_the_if_is_lifted_and_the_if_stays() -> None:
    check_pass(LiftTransformParams(), Small, SmallExpected)


@pytest.mark.parametrize("cond", [True, False])
@pytest.mark.parametrize("shared", [False, True])
def test_the_lifted_pair_computes_the_original_for_both_conditions(
    cond: bool, shared: bool
) -> None:
    x, weights = _inputs(cond)
    expected = VirtualMachine(Small)["main"](x, *weights)
    lifted = LiftTransformParams(shared_transform=shared)(Small)
    vm = VirtualMachine(lifted)
    name = "transform_params" if shared else "main_transform_params"
    transformed = vm[name](weights)
    assert same_bits(vm["main"](x, *transformed), expected)
    assert not same_bits(expected, VirtualMachine(Small)["main"](x, *_inputs(not cond)[1]))


@pytest.mark.parametrize("cond", [True, False])
def test_the_lifted_transform_runs_lazily_beside_the_if(cond: bool) -> None:
    x, weights = _inputs(cond)
    lifted = LiftTransformParams()(Small)
    lazy = LazyTransformParams(strict=True)(lifted)
    store = Store(weights)
    VirtualMachine(lazy, {"get_item": store.get_item, "set_item": store.set_item})[
        "main_transform_params"
    ]()
    got = VirtualMachine(lifted)["main"](x, *store.output_tuple())
    assert same_bits(got, VirtualMachine(Small)["main"](x, *weights))


def _tvm() -> None:
    pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")


def test_tvm_s_test_condition_printed_by_tvm_lifts_here_as_there() -> None:
    """TVM prints Before, we parse, lift and print in TVM's flavour; TVM parses that, its
    well_formed passes and it equals TVM's own LiftTransformParams output."""
    _tvm()
    import tvm
    from tvm import relax
    from tvm.script import from_source

    from lazyparams.script import parse

    tvm_before = from_source(Condition.script(flavor="tvm"))
    ours = LiftTransformParams()(parse(tvm_before.script()))
    theirs = relax.transform.LiftTransformParams()(tvm_before)
    read = from_source(ours.script(flavor="tvm"))
    assert relax.analysis.well_formed(read) is not False
    tvm.ir.assert_structural_equal(read, theirs)
