"""The standard pipeline: fuse, schedule, lazy rewrite, kill after last use; its lazy functions peak
at a memory that does not grow with the number of layers, exactly as predicted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

from benchmarks.workloads import largest_step_bytes, llama_inputs, llama_like
from lazyparams.analysis import estimate_peak_memory, weight_struct_info
from lazyparams.analysis.memory_model import Callees
from lazyparams.ir import Function, IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.transform import (
    FuseLayoutCast,
    KillAfterLastUse,
    LazyTransformParams,
    ScheduleForMemory,
    Sequential,
    standard_pipeline,
)
from tests.programs import FUNC_NAME, SETTINGS, transform_programs
from tests.script.seed_modules import Before as SeedBefore
from tests.transform.harness import assert_well_formed, check_kills, compare_lazy

FUNC = "main_transform_params"


def predicted_peak(lazy: IRModule, eager: IRModule, **kwargs: Any) -> int:
    func, original = lazy[FUNC], eager[FUNC]
    assert isinstance(func, Function) and isinstance(original, Function)
    inputs = weight_struct_info(original)
    return estimate_peak_memory(func, inputs=inputs, **kwargs).peak_bytes


def test_the_pipeline_is_fuse_schedule_then_lazy_then_kill() -> None:
    pipeline = standard_pipeline()
    assert isinstance(pipeline, Sequential)
    kinds = [type(p) for p in pipeline.passes]
    assert kinds == [FuseLayoutCast, ScheduleForMemory, LazyTransformParams, KillAfterLastUse]


def test_the_seed_module_goes_through_the_pipeline() -> None:
    after = standard_pipeline()(SeedBefore)
    assert_well_formed(after)
    func = after[FUNC]
    assert isinstance(func, Function)
    check_kills(func)
    store = compare_lazy(SeedBefore, after)
    assert sorted(store.loads) == [0, 1]


def test_names_and_functions_reach_every_step() -> None:
    after = standard_pipeline(fget_item="load", fset_item="store", func_names=[FUNC])(SeedBefore)
    weights = (np.ones((3, 16, 3, 3), "float32"), np.ones((16, 16, 3, 3), "float32"))
    outputs: dict[int, Any] = {}
    vm = VirtualMachine(
        after, {"load": lambda i: weights[i], "store": lambda i, v: outputs.__setitem__(i, v)}
    )
    vm[FUNC]()
    assert sorted(outputs) == [0, 1]
    callees = Callees(fget_item="load", handoff=("store",))
    assert vm.stats.peak_bytes == predicted_peak(after, SeedBefore, callees=callees)


# The llama-like workload of DESIGN.md -------------------------------------------------------


@pytest.mark.parametrize("layers", [8, 16, 32])
def test_the_lazy_peak_does_not_grow_with_the_layers(layers: int) -> None:
    eager = llama_like(layers)
    func = eager[FUNC]
    assert isinstance(func, Function)
    step = largest_step_bytes(func)
    peak = predicted_peak(standard_pipeline()(eager), eager)
    assert peak == predicted_peak(standard_pipeline()(llama_like(8)), llama_like(8))
    assert peak <= 1.5 * step
    # Without the schedule every weight is loaded before any is transformed.
    seed_style = predicted_peak(LazyTransformParams()(eager), eager)
    assert seed_style > layers * step


def test_the_vm_meters_the_predicted_peak_on_the_workload() -> None:
    layers, d, f = 8, 64, 96
    eager = llama_like(layers, d, f)
    lazy = standard_pipeline()(eager)
    weights = llama_inputs(layers, d, f)
    outputs: dict[int, Any] = {}
    vm = VirtualMachine(
        lazy, {"get_item": lambda i: weights[i], "set_item": lambda i, v: outputs.__setitem__(i, v)}
    )
    vm[FUNC]()
    assert vm.stats.peak_bytes == predicted_peak(lazy, eager)
    expected = VirtualMachine(eager)[FUNC](weights)
    assert all(np.array_equal(outputs[i], e) for i, e in enumerate(expected))


@SETTINGS
@given(transform_programs())
def test_pipeline_output_is_well_formed_and_runs_the_same(
    mod: IRModule,
) -> None:
    after = standard_pipeline()(mod)
    assert_well_formed(after)
    func = after[FUNC_NAME]
    assert isinstance(func, Function)
    check_kills(func)
    compare_lazy(mod, after)
