"""estimate_peak_memory and check_budget: byte-exact timelines, checked by hand and against the
VM's meter, for eager functions, lazy functions and the lazy prediction of eager ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from lazyparams.analysis import (
    MemoryProfile,
    check_budget,
    estimate_peak_memory,
    weight_struct_info,
)
from lazyparams.analysis.memory import format_bytes
from lazyparams.errors import BudgetError, StructInfoError, TransformError
from lazyparams.ir import BlockBuilder, Function, IRModule, TensorStructInfo, Var, prim
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    KillAfterLastUse,
    LazyTransformParams,
    Sequential,
    standard_pipeline,
)
from tests.programs import FUNC_NAME, SETTINGS, random_inputs, transform_programs

FUNC = "main_transform_params"


def metered(vm: VirtualMachine) -> list[int]:
    """The VM's timeline: the params, then every binding."""
    return [entry.bytes for entry in vm.stats.timeline]


def predicted(profile: MemoryProfile) -> list[int]:
    return [profile.start_bytes, *profile.timeline]


def run_lazy(mod: IRModule, weights: tuple[Any, ...], name: str = FUNC) -> VirtualMachine:
    """Run a lazy function with get_item / set_item over `weights`; outputs are discarded."""
    externs = {"get_item": lambda i: weights[i], "set_item": lambda i, v: None}
    vm = VirtualMachine(mod, externs)
    vm[name]()
    return vm


# An eager function, by hand ------------------------------------------------------------------


@I.ir_module
class Eager:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 8), "float32"), R.Tensor((8, 8), "float16")),
    ) -> R.Tuple(R.Tensor((8, 4), "float32"), R.Tensor((8, 8), "float32")):
        with R.dataflow():
            a = params[0]
            b = params[1]
            at = R.permute_dims(a, axes=[1, 0])
            bf = R.astype(b, "float32")
            gv = (at, bf)
            R.output(gv)
        return gv


def test_eager_inputs_live_from_the_start_and_outputs_to_the_end() -> None:
    profile = estimate_peak_memory(Eager[FUNC])
    # params: 128 + 128 bytes; `at` frees params[0] after it; `bf` frees params[1].
    assert profile.start_bytes == 256
    assert profile.timeline == (256, 256, 384, 512, 384)
    assert (profile.peak_bytes, profile.peak_index, profile.peak_binding) == (512, 3, "bf")
    live = {(v.name, v.nbytes) for v in profile.live_at_peak}
    assert live == {("bf", 256), ("params[1]", 128), ("at", 128)}
    assert "peak 512 B at binding bf" in str(profile)


def test_eager_prediction_is_what_the_vm_meters() -> None:
    vm = VirtualMachine(Eager)
    vm[FUNC]((np.ones((4, 8), "float32"), np.ones((8, 8), "float16")))
    profile = estimate_peak_memory(Eager[FUNC])
    assert metered(vm) == predicted(profile)
    assert (vm.stats.peak_bytes, vm.stats.peak_binding) == (512, "bf")


def test_as_lazy_predicts_the_standard_pipeline() -> None:
    profile = estimate_peak_memory(Eager[FUNC], as_lazy=True)
    # a and b load 128 each; each output is handed off as soon as it is computed.
    assert profile.timeline == (128, 256, 384, 384, 0)
    assert (profile.peak_bytes, profile.peak_binding) == (384, "at")
    lazy = standard_pipeline()(Eager)
    actual = estimate_peak_memory(lazy[FUNC], inputs=weight_struct_info(Eager[FUNC]))
    assert actual.peak_bytes == 384
    weights = (np.ones((4, 8), "float32"), np.ones((8, 8), "float16"))
    assert metered(run_lazy(lazy, weights)) == predicted(actual)


def test_weight_struct_info_of_unpacked_and_runtime_params() -> None:
    x = Var("x", TensorStructInfo((2,), "float32"))
    w = Var("w", TensorStructInfo((3, 3), "float16"))
    func = BlockBuilder().finish_function((x, w), w, attrs={"num_input": 1})
    assert weight_struct_info(func) == (w.struct_info,)
    assert weight_struct_info(Eager[FUNC]) == tuple(Eager[FUNC].params[0].struct_info.fields)


# Lazy functions -------------------------------------------------------------------------------


@I.ir_module
class Lazy:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        a = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((16, 16), "float32"),
        )
        at = R.permute_dims(a, axes=[1, 0])
        s0 = R.call_packed("set_item", R.prim_value(0), at, sinfo_args=(R.Object,))
        d = R.add(at, at)
        k = R.vm.kill_object(a)
        s1 = R.call_packed("set_item", R.prim_value(1), d, sinfo_args=(R.Object,))
        return (s0, s1)


def test_set_item_hands_off_and_kill_frees_before_its_step() -> None:
    profile = estimate_peak_memory(Lazy[FUNC])
    # `at` stops counting at its set_item although `d` still reads it; the kill drops `a`.
    assert profile.timeline == (1024, 2048, 1024, 2048, 1024, 0)
    assert (profile.peak_bytes, profile.peak_binding) == (2048, "at")
    vm = run_lazy(Lazy, (np.ones((16, 16), "float32"),))
    assert metered(vm) == predicted(profile)


@I.ir_module
class OpaqueLoad:
    @R.function(pure=False)
    def main_transform_params() -> R.Tuple(R.Object):
        lv = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
        s = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
        return (s,)


def test_a_load_typed_object_needs_the_inputs() -> None:
    with pytest.raises(StructInfoError, match=r"binding lv \(input 1\).*inputs="):
        estimate_peak_memory(OpaqueLoad[FUNC])
    inputs = (TensorStructInfo((2,), "float32"), TensorStructInfo((5, 5), "float16"))
    profile = estimate_peak_memory(OpaqueLoad[FUNC], inputs=inputs)
    assert profile.timeline == (50, 0)
    with pytest.raises(StructInfoError, match=r"expected an index below 1, .* got 1"):
        estimate_peak_memory(OpaqueLoad[FUNC], inputs=inputs[:1])


# Shapes, dtypes, tuples ---------------------------------------------------------------------


@I.ir_module
class Symbolic:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor((4, "n"), "float16"):
        y = R.permute_dims(x, axes=[1, 0])
        z = R.astype(y, "float16")
        return z


def test_symbolic_dims_take_sizes_or_are_refused_by_name() -> None:
    with pytest.raises(StructInfoError, match=r"symbolic dim 'n' has no value; expected .*sizes="):
        estimate_peak_memory(Symbolic["main"])
    profile = estimate_peak_memory(Symbolic["main"], sizes={"n": 10})
    assert (profile.start_bytes, profile.timeline) == (160, (320, 240))
    vm = VirtualMachine(Symbolic)
    vm["main"](np.ones((10, 4), "float32"))
    assert metered(vm) == predicted(profile)


def test_unknown_shapes_are_refused() -> None:
    x = Var("x", TensorStructInfo(None, "float32", 2))
    func = BlockBuilder().finish_function((x,), x)
    with pytest.raises(StructInfoError, match="x: tensor of unknown shape; expected a known shape"):
        estimate_peak_memory(func)
    with pytest.raises(StructInfoError, match="expected a Relax Function, got str"):
        estimate_peak_memory("main")  # type: ignore[arg-type]


def test_a_compound_dim_is_evaluated() -> None:
    n = prim.PrimVar("n")
    x = Var("x", TensorStructInfo((n * 2 + 1, n // 2), "int8"))
    func = BlockBuilder().finish_function((x,), x)
    assert estimate_peak_memory(func, {"n": 6}).peak_bytes == 13 * 3


@I.ir_module
class Tuples:
    @R.function
    def main(x: R.Tensor((8, 8), "float32")) -> R.Tensor((8, 8), "int8"):
        t = R.quantize_int8(x, axis=0)
        q = t[0]
        s = t[1]
        s2 = R.multiply(s, s)
        return q


def test_tuple_fields_count_once_and_outlive_the_tuple() -> None:
    profile = estimate_peak_memory(Tuples["main"])
    # x 256; t holds q (64) and the scales (32); `s2` adds 32 while q and s are held.
    assert (profile.start_bytes, profile.timeline) == (256, (352, 96, 96, 128))
    vm = VirtualMachine(Tuples)
    vm["main"](np.ones((8, 8), "float32"))
    assert metered(vm) == predicted(profile)


@I.ir_module
class Int4:
    @R.function
    def main(x: R.Tensor((4, 6), "float32")) -> R.Tensor((4, 6), "int4"):
        y = R.astype(x, "int4")
        return y


def test_int4_takes_a_byte_per_element() -> None:
    profile = estimate_peak_memory(Int4["main"])
    assert profile.timeline == (96 + 24,)
    vm = VirtualMachine(Int4)
    vm["main"](np.ones((4, 6), "float32"))
    assert metered(vm) == predicted(profile)


def test_as_lazy_refuses_a_weight_tuple_read_whole() -> None:
    @I.ir_module
    class Whole:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2,), "float32")),
        ) -> R.Tuple(R.Tensor((2,), "float32")):
            t = params
            return t

    with pytest.raises(TransformError, match="reads the weight tuple params whole"):
        estimate_peak_memory(Whole[FUNC], as_lazy=True)
    assert estimate_peak_memory(Whole[FUNC]).peak_bytes == 8


@I.ir_module
class Unpacked:
    @R.function
    def main_transform_params(
        w0: R.Tensor((3, 5), "float32"), w1: R.Tensor((4, 4), "float32")
    ) -> R.Tuple(R.Tensor((3, 5), "float32"), R.Tensor((4, 4), "float16")):
        h = R.astype(w1, "float16")
        return (w0, h)


def test_as_lazy_loads_unpacked_weights_at_first_use_and_passthroughs_at_the_end() -> None:
    profile = estimate_peak_memory(Unpacked[FUNC], as_lazy=True)
    assert profile.names == ("h", "w0")
    assert profile.timeline == (64 + 32, 60)
    lazy = standard_pipeline()(Unpacked)
    actual = estimate_peak_memory(lazy[FUNC], inputs=weight_struct_info(Unpacked[FUNC]))
    assert actual.peak_bytes == profile.peak_bytes
    vm = run_lazy(lazy, (np.ones((3, 5), "float32"), np.ones((4, 4), "float32")))
    assert metered(vm) == predicted(actual)


# Budgets ------------------------------------------------------------------------------------


def test_check_budget_returns_the_profile_when_it_fits() -> None:
    assert check_budget(Eager[FUNC], 512).peak_bytes == 512
    assert check_budget(Eager[FUNC], 384, as_lazy=True).peak_binding == "at"


def test_check_budget_names_the_first_binding_over_and_the_minimum() -> None:
    with pytest.raises(BudgetError) as info:
        check_budget(Eager[FUNC], 300)
    message = str(info.value)
    assert "budget of 300 bytes" in message
    assert "binding at needs 384 bytes" in message
    assert "expected a budget of at least 512 bytes" in message
    assert "at binding bf), got 300" in message


def test_check_budget_below_the_inputs_names_them() -> None:
    with pytest.raises(BudgetError, match=r"the params, held from the start, needs 256 bytes"):
        check_budget(Eager[FUNC], 100)


@pytest.mark.parametrize("budget", [-1, 1.5, True, "1GB"])
def test_check_budget_refuses_a_bad_budget(budget: Any) -> None:
    with pytest.raises(BudgetError, match="expected a budget of zero or more bytes as an int"):
        check_budget(Eager[FUNC], budget)


# Properties on random transform programs ----------------------------------------------------


@SETTINGS
@given(transform_programs())
def test_every_prediction_is_the_vms_meter_byte_for_byte(mod: IRModule) -> None:
    eager = mod[FUNC_NAME]
    assert isinstance(eager, Function)
    weights = random_inputs(eager, 0)
    vm = VirtualMachine(mod)
    vm[FUNC_NAME](weights)
    profile = estimate_peak_memory(eager)
    assert metered(vm) == predicted(profile)
    assert vm.stats.peak_binding == profile.peak_binding

    lazy = standard_pipeline()(mod)
    lazy_profile = estimate_peak_memory(lazy[FUNC_NAME], inputs=weight_struct_info(eager))
    lazy_vm = run_lazy(lazy, weights, FUNC_NAME)
    assert metered(lazy_vm) == predicted(lazy_profile)
    assert lazy_vm.stats.peak_binding == lazy_profile.peak_binding
    # The lazy prediction of the eager function is the pipeline without its scheduling step.
    unscheduled = Sequential([LazyTransformParams(), KillAfterLastUse()])(mod)[FUNC_NAME]
    assert isinstance(unscheduled, Function)
    as_lazy = estimate_peak_memory(eager, as_lazy=True)
    assert (
        as_lazy.peak_bytes
        == estimate_peak_memory(unscheduled, inputs=weight_struct_info(eager)).peak_bytes
    )


@SETTINGS
@given(transform_programs())
def test_budget_at_the_peak_fits_and_one_byte_less_does_not(mod: IRModule) -> None:
    func = mod[FUNC_NAME]
    assert isinstance(func, Function)
    peak = estimate_peak_memory(func).peak_bytes
    assert check_budget(func, peak).peak_bytes == peak
    if peak:
        with pytest.raises(BudgetError, match=f"at least {peak} bytes"):
            check_budget(func, peak - 1)


@I.ir_module
class Inline:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((2, 8), "float32")),
    ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((8, 2), "float16")):
        s = R.add(params[0], params[0])
        t = R.permute_dims(params[1], axes=[1, 0])
        h = R.astype(t, "float16")
        return (s, h)


def test_as_lazy_loads_a_weight_read_inline_before_its_reader() -> None:
    profile = estimate_peak_memory(Inline[FUNC], as_lazy=True)
    assert profile.timeline == (128, 128, 96)
    lazy = standard_pipeline()(Inline)
    actual = estimate_peak_memory(lazy[FUNC], inputs=weight_struct_info(Inline[FUNC]))
    assert actual.peak_bytes == profile.peak_bytes
    vm = run_lazy(lazy, (np.ones((4, 4), "float32"), np.ones((2, 8), "float32")))
    assert metered(vm) == predicted(actual)


def test_bytes_read_in_binary_units() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1536, 3 * 1024**2)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "3.0 MiB",
    ]
