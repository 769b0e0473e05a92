"""LiftTransformParams(consume_params=True), TVM's `relax.lift_transform_params.consume_params`:
the transform resets each slot of its `params` tuple after loading it
(`R.call_pure_packed("vm.builtin.tuple_reset_item", ...)`), so a weight is freed after its last
use; the VM frees it there, the memory estimate predicts it, and a read after the reset fails."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.analysis import estimate_peak_memory
from lazyparams.errors import ParseError, RuntimeExecError, TransformError
from lazyparams.ir import (
    Call,
    Function,
    IRModule,
    PrimValue,
    TupleGetItem,
    assert_structural_equal,
)
from lazyparams.ir.op_registry import get_op
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams, LiftTransformParams, ScheduleForMemory
from tests.transform.harness import assert_round_trip, check_pass
from tests.transform.test_lift_transform_params import check_lifted

CONSUME = LiftTransformParams(consume_params=True)


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
            w1_transformed = R.call_tir(cls.transpose, (w1,), out_sinfo=R.Tensor((4, 3), "float32"))
            y1 = R.matmul(x, w1_transformed)
            y2 = R.matmul(y1, w2)
            R.output(y2)
        return y2


def test_basic_with_consume_params() -> None:
    @I.ir_module
    class Expected:
        @T.prim_func
        def transpose(w1: T.Buffer((3, 4), "float32"), out: T.Buffer((4, 3), "float32")):
            for i, j in T.grid(4, 3):
                with T.block("t"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads(w1[vj, vi])
                    T.writes(out[vi, vj])
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
                _1: R.Tuple = R.call_pure_packed(
                    "vm.builtin.tuple_reset_item",
                    params,
                    R.prim_value(T.int32(0)),
                    sinfo_args=(R.Tuple,),
                )
                lv2 = R.call_tir(cls.transpose, (lv1,), out_sinfo=R.Tensor((4, 3), "float32"))
                lv: R.Tensor((3, 3), "float32") = params[1]
                _2: R.Tuple = R.call_pure_packed(
                    "vm.builtin.tuple_reset_item",
                    params,
                    R.prim_value(T.int32(1)),
                    sinfo_args=(R.Tuple,),
                )
                gv = (lv, lv2)
                R.output(gv)
            return gv

    after = check_pass(CONSUME, Before, Expected)
    check_lifted(Before, after)
    main = after["main"]
    assert isinstance(main, Function)
    assert [p.name_hint for p in main.params] == ["x", "w2", "w1_transformed"]
    assert_round_trip(parse(after.script(flavor="tvm")))


def _three_squares() -> IRModule:
    @I.ir_module
    class Squares:
        @R.function
        def main(
            x: R.Tensor((64,), "float32"),
            a: R.Tensor((64,), "float32"),
            b: R.Tensor((64,), "float32"),
            c: R.Tensor((64,), "float32"),
        ) -> R.Tensor((64,), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                a2 = R.multiply(a, a)
                b2 = R.multiply(b, b)
                c2 = R.multiply(c, c)
                y = R.add(R.add(R.add(x, a2), b2), c2)
                R.output(y)
            return y

    return Squares


@pytest.mark.parametrize("consume", [False, True])
def test_the_estimate_counts_a_reset_slot_as_freed_as_the_vm_does(consume: bool) -> None:
    before = _three_squares()
    after = LiftTransformParams(consume_params=consume)(before)
    check_lifted(before, after)
    transform = after["main_transform_params"]
    assert isinstance(transform, Function)
    vm = VirtualMachine(after)
    weights = tuple(np.full(64, i, "float32") for i in range(3))
    vm["main_transform_params"](weights)
    predicted = estimate_peak_memory(transform)
    assert predicted.peak_bytes == vm.stats.peak_bytes
    assert list(predicted.timeline) == [e.bytes for e in vm.stats.timeline[1:]]
    # three weights and two squares at once without resets; with them each weight goes as soon
    # as its square exists, so at most one weight and the squares are held
    assert vm.stats.peak_bytes == (5 if not consume else 4) * 64 * 4


RESET_THEN_READ = """
@I.ir_module
class Module:
    @R.function
    def main(params: R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2,), "float32"))):
        R.func_attr({"num_input": 0})
        with R.dataflow():
            a = params[0]
            R.call_pure_packed("vm.builtin.tuple_reset_item", params, 0, ty_args=(R.Tuple,))
            again = params[0]
            gv = (a, again)
            R.output(gv)
        return gv
"""


def test_a_slot_read_after_its_reset_is_an_error() -> None:
    mod = parse(RESET_THEN_READ)
    assert_round_trip(mod)
    assert "R.call_pure_packed(" in mod.script() and "R.call_pure_packed(" in (
        mod.script(flavor="tvm")
    )
    vm = VirtualMachine(mod)
    weights = (np.ones(2, "float32"), np.zeros(2, "float32"))
    with pytest.raises(RuntimeExecError, match=r"params\[0\] was released by vm.builtin"):
        vm["main"](weights)


def test_call_pure_packed_of_a_user_extern_is_refused() -> None:
    text = RESET_THEN_READ.replace("vm.builtin.tuple_reset_item", "my_extern")
    with pytest.raises(ParseError, match=r"expected one of the VM's pure builtins.*'my_extern'"):
        parse(text)


def test_consume_params_must_be_a_bool() -> None:
    with pytest.raises(TransformError, match="expected consume_params to be a bool"):
        LiftTransformParams(consume_params="yes")  # type: ignore[arg-type]


def test_scheduling_keeps_each_reset_after_the_read_of_its_slot() -> None:
    """Nothing in the data flow ties a reset to its read; ScheduleForMemory takes the resets
    out, orders the rest, and puts each back right after its read."""
    before = _three_squares()
    consumed = CONSUME(before)
    scheduled = ScheduleForMemory()(consumed)
    check_lifted(before, scheduled)
    transform = scheduled["main_transform_params"]
    assert isinstance(transform, Function)
    bindings = transform.bindings()
    for index, binding in enumerate(bindings):
        if isinstance(binding.value, Call) and binding.value.op == get_op("call_pure_packed"):
            read = bindings[index - 1].value
            assert isinstance(read, TupleGetItem)
            slot = binding.value.args[2]
            assert isinstance(slot, PrimValue) and slot.value == IntImm(read.index, "int32")
    vm = VirtualMachine(scheduled)
    vm["main_transform_params"](tuple(np.full(64, i, "float32") for i in range(3)))
    assert vm.stats.peak_bytes == estimate_peak_memory(transform).peak_bytes


def test_the_lazy_pass_drops_the_resets_it_has_no_use_for() -> None:
    before = _three_squares()
    lazy = LazyTransformParams(strict=True)(CONSUME(before))
    plain = LazyTransformParams(strict=True)(LiftTransformParams()(before))
    assert_structural_equal(lazy, plain, map_free_vars=True)
