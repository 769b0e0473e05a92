"""FuseLayoutCast: concat / permute_dims / astype chains become one `R.layout_cast`, with the
same bits, no intermediate and a peak that does not rise (predicted exactly as metered)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks.workloads import llama_inputs, llama_like
from lazyparams.analysis import estimate_peak_memory, weight_struct_info
from lazyparams.ir import Function, IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    FuseLayoutCast,
    KillAfterLastUse,
    LazyTransformParams,
    ScheduleForMemory,
    Sequential,
    standard_pipeline,
)
from tests.transform.harness import assert_round_trip, check_pass, run_eager, same_bits, weights_of

FUNC = "main_transform_params"


@I.ir_module
class CastOfJoin:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 6), "bfloat16"), R.Tensor((2, 6), "bfloat16")),
    ) -> R.Tuple(R.Tensor((6, 6), "float16")):
        a = params[0]
        b = params[1]
        joined = R.concat((a, b), axis=0)
        cast = R.astype(joined, "float16")
        gv = (cast,)
        return gv


def test_a_cast_of_a_join_becomes_one_op() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 6), "bfloat16"), R.Tensor((2, 6), "bfloat16")),
        ) -> R.Tuple(R.Tensor((6, 6), "float16")):
            a = params[0]
            b = params[1]
            cast = R.layout_cast((a, b), axis=0, axes=[0, 1], dtype="float16")
            gv = (cast,)
            return gv

    check_pass(FuseLayoutCast(), CastOfJoin, Expected)


@I.ir_module
class JoinOfCasts:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 6), "bfloat16"), R.Tensor((4, 2), "bfloat16")),
    ) -> R.Tuple(R.Tensor((8, 4), "float32")):
        a = params[0]
        b = params[1]
        ca = R.astype(a, "float32")
        cb = R.astype(b, "float32")
        joined = R.concat((ca, cb), axis=1)
        moved = R.permute_dims(joined, axes=[1, 0])
        gv = (moved,)
        return gv


def test_widening_casts_of_each_part_then_a_join_and_a_transpose_become_one_op() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 6), "bfloat16"), R.Tensor((4, 2), "bfloat16")),
        ) -> R.Tuple(R.Tensor((8, 4), "float32")):
            a = params[0]
            b = params[1]
            moved = R.layout_cast((a, b), axis=1, axes=[1, 0], dtype="float32")
            gv = (moved,)
            return gv

    check_pass(FuseLayoutCast(), JoinOfCasts, Expected)


@I.ir_module
class JoinOfNarrowingCasts:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 6), "float32"), R.Tensor((4, 2), "float32")),
    ) -> R.Tuple(R.Tensor((8, 4), "bfloat16")):
        a = params[0]
        b = params[1]
        ca = R.astype(a, "bfloat16")
        cb = R.astype(b, "bfloat16")
        joined = R.concat((ca, cb), axis=1)
        moved = R.permute_dims(joined, axes=[1, 0])
        gv = (moved,)
        return gv


def test_narrowing_casts_of_the_parts_stay_before_the_join() -> None:
    """Fused, the join would hold the float32 parts with its output, above the unfused peak
    (the bfloat16 casts with the output); the join of the computed casts stays too."""
    check_pass(FuseLayoutCast(), JoinOfNarrowingCasts, JoinOfNarrowingCasts)


@I.ir_module
class Transposes:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((2, 3, 4), "float32"), R.Tensor((3, 5), "float32")),
    ) -> R.Tuple(
        R.Tensor((4, 2, 3), "float16"), R.Tensor((5, 3), "float32"), R.Tensor((3, 5), "float16")
    ):
        x = params[0]
        y = params[1]
        cast = R.astype(x, "float16")
        moved = R.permute_dims(cast, axes=[2, 0, 1])
        again = R.permute_dims(moved, axes=[0, 1, 2])
        twice = R.permute_dims(y, axes=[1, 0])
        kept = R.astype(y, "float16")
        gv = (again, twice, kept)
        return gv


def test_permutes_compose_and_a_lone_op_stays() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 3, 4), "float32"), R.Tensor((3, 5), "float32")),
        ) -> R.Tuple(
            R.Tensor((4, 2, 3), "float16"),
            R.Tensor((5, 3), "float32"),
            R.Tensor((3, 5), "float16"),
        ):
            x = params[0]
            y = params[1]
            again = R.layout_cast(x, axis=0, axes=[2, 0, 1], dtype="float16")
            twice = R.permute_dims(y, axes=[1, 0])
            kept = R.astype(y, "float16")
            gv = (again, twice, kept)
            return gv

    check_pass(FuseLayoutCast(), Transposes, Expected)


@I.ir_module
class Unfusable:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 6), "float32"), R.Tensor((4, 6), "float32")),
    ) -> R.Tuple(
        R.Tensor((8, 6), "float32"),
        R.Tensor((8, 6), "float16"),
        R.Tensor((6, 4), "float32"),
        R.Tensor((6, 4), "float32"),
    ):
        a = params[0]
        b = params[1]
        joined = R.concat((a, b), axis=0)
        cast = R.astype(joined, "float16")
        moved = R.permute_dims(a, axes=[1, 0])
        half = R.astype(moved, "float16")
        back = R.astype(half, "float32")
        gv = (joined, cast, moved, back)
        return gv


def test_values_read_elsewhere_and_second_casts_are_not_fused() -> None:
    """`joined` and `moved` are outputs as well: fusing would compute them twice. A second
    cast rounds twice, so it stays a cast of its own."""
    check_pass(FuseLayoutCast(), Unfusable, Unfusable)


@pytest.mark.parametrize(
    "before", [CastOfJoin, JoinOfCasts, JoinOfNarrowingCasts, Transposes, Unfusable]
)
def test_fused_modules_give_the_same_bits_and_print_back(before: IRModule) -> None:
    after = FuseLayoutCast()(before)
    assert_round_trip(after)
    weights = weights_of(before)
    want, got = run_eager(before, weights), run_eager(after, weights)
    assert all(same_bits(w, g) for w, g in zip(want, got, strict=True))


def _peak(lazy: IRModule, eager: IRModule) -> int:
    func, original = lazy[FUNC], eager[FUNC]
    assert isinstance(func, Function) and isinstance(original, Function)
    return estimate_peak_memory(func, inputs=weight_struct_info(original)).peak_bytes


def _unfused_pipeline() -> Sequential:
    return Sequential([ScheduleForMemory(), LazyTransformParams(), KillAfterLastUse()])


def test_the_fused_workload_peaks_lower_exactly_as_metered() -> None:
    layers, d, f = 4, 64, 96
    eager = llama_like(layers, d, f)
    fused, unfused = standard_pipeline()(eager), _unfused_pipeline()(eager)
    weights = llama_inputs(layers, d, f)
    outputs: dict[int, Any] = {}
    externs = {"get_item": lambda i: weights[i], "set_item": outputs.__setitem__}
    vm = VirtualMachine(fused, externs)
    vm[FUNC]()
    assert vm.stats.peak_bytes == _peak(fused, eager)
    assert _peak(fused, eager) < _peak(unfused, eager)
    expected = VirtualMachine(eager)[FUNC](weights)
    assert all(same_bits(outputs[i], e) for i, e in enumerate(expected))
    assert "layout_cast" in fused.script()
    assert np.isfinite(outputs[0]).all()


@I.ir_module
class TwoCasts:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((4, 6), "float32")),
    ) -> R.Tuple(R.Tensor((6, 4), "float32")):
        a = params[0]
        moved = R.permute_dims(a, axes=[1, 0])
        half = R.astype(moved, "float16")
        back = R.astype(half, "float32")
        gv = (back,)
        return gv


def test_a_second_cast_stays_apart() -> None:
    """Casting twice rounds twice: the chain ends at the first cast."""

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 6), "float32")),
        ) -> R.Tuple(R.Tensor((6, 4), "float32")):
            a = params[0]
            half = R.layout_cast(a, axis=0, axes=[1, 0], dtype="float16")
            back = R.astype(half, "float32")
            gv = (back,)
            return gv

    after = check_pass(FuseLayoutCast(), TwoCasts, Expected)
    weights = weights_of(TwoCasts)
    assert same_bits(run_eager(TwoCasts, weights), run_eager(after, weights))
