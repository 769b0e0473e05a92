"""Memory is real: kill_object frees, values die after their last use, the meter sees it all."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from typing import Any

import numpy as np
import pytest

from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T

N, M = 256, 128
NBYTES = N * M * 4


@I.ir_module
class TwoLoads:
    @T.prim_func
    def transpose(x: T.Buffer((256, 128), "float32"), out: T.Buffer((128, 256), "float32")):
        for i, j in T.grid(128, 256):
            with T.block("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = x[vj, vi]

    @R.function(pure=False)
    def killing() -> R.Tuple:
        cls = TwoLoads
        a = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        at = R.call_tir(cls.transpose, (a,), out_sinfo=R.Tensor((128, 256), "float32"))
        k0 = R.vm.kill_object(a)
        s0 = R.call_packed("set_item", R.prim_value(0), at, sinfo_args=(R.Object,))
        k1 = R.vm.kill_object(at)
        b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
        bt = R.call_tir(cls.transpose, (b,), out_sinfo=R.Tensor((128, 256), "float32"))
        k2 = R.vm.kill_object(b)
        s1 = R.call_packed("set_item", R.prim_value(1), bt, sinfo_args=(R.Object,))
        k3 = R.vm.kill_object(bt)
        return R.tuple()

    @R.function(pure=False)
    def no_kills() -> R.Tuple:
        cls = TwoLoads
        a = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        at = R.call_tir(cls.transpose, (a,), out_sinfo=R.Tensor((128, 256), "float32"))
        s0 = R.call_packed("set_item", R.prim_value(0), at, sinfo_args=(R.Object,))
        b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
        bt = R.call_tir(cls.transpose, (b,), out_sinfo=R.Tensor((128, 256), "float32"))
        s1 = R.call_packed("set_item", R.prim_value(1), bt, sinfo_args=(R.Object,))
        return R.tuple()

    @R.function(pure=False)
    def slicing() -> R.Tuple:
        a = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        a1 = R.match_cast(a, R.Tensor((256, 128), "float32"))
        row = R.strided_slice(a1, axes=[0], begin=[0], end=[1])
        k0 = R.vm.kill_object(a)
        k1 = R.vm.kill_object(a1)
        s0 = R.call_packed("set_item", R.prim_value(0), row, sinfo_args=(R.Object,))
        b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
        s1 = R.call_packed("set_item", R.prim_value(1), b, sinfo_args=(R.Object,))
        return R.tuple()


class Checkpoint:
    """get_item makes a fresh array each time (as a loader would) and keeps only a weakref."""

    def __init__(self) -> None:
        self.loaded: dict[int, weakref.ref[np.ndarray]] = {}
        self.outputs: dict[int, np.ndarray] = {}
        self.alive_at_get: dict[int, list[int]] = {}
        self.alive_at_set: dict[int, list[int]] = {}
        self.traced_at_get: dict[int, int] = {}

    def _alive(self) -> list[int]:
        return [i for i, ref in self.loaded.items() if ref() is not None]

    def get_item(self, i: int) -> np.ndarray:
        self.alive_at_get[i] = self._alive()
        if tracemalloc.is_tracing():
            self.traced_at_get[i] = tracemalloc.get_traced_memory()[0]
        value = np.random.default_rng(i).standard_normal((N, M)).astype(np.float32)
        self.loaded[i] = weakref.ref(value)
        return value

    def set_item(self, i: int, value: np.ndarray) -> None:
        self.alive_at_set[i] = self._alive()
        value.flags.writeable = False  # the sink keeps it; nobody may write it any more
        self.outputs[i] = value

    def vm(self) -> VirtualMachine:
        return VirtualMachine(
            TwoLoads, externs={"get_item": self.get_item, "set_item": self.set_item}
        )


@pytest.mark.parametrize("func", ["killing", "no_kills"])
def test_an_input_is_freed_before_the_next_load(func: str) -> None:
    ckpt = Checkpoint()
    gc.disable()  # the frees must come from reference counting, right at the kill
    try:
        ckpt.vm()[func]()
    finally:
        gc.enable()
    assert ckpt.alive_at_set[0] == []  # input 0 died at its kill (or last use), before set_item
    assert ckpt.alive_at_get[1] == []
    x0 = np.random.default_rng(0).standard_normal((N, M)).astype(np.float32)
    np.testing.assert_array_equal(ckpt.outputs[0], x0.T)


def test_tracemalloc_sees_the_input_released() -> None:
    ckpt = Checkpoint()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        ckpt.vm()["killing"]()
    finally:
        tracemalloc.stop()
    # at the second load only output 0 (held by the sink) remains, not input 0 as well
    assert ckpt.traced_at_get[1] - baseline < NBYTES + NBYTES // 2


def test_meter_timeline_of_the_lazy_program() -> None:
    ckpt = Checkpoint()
    vm = ckpt.vm()
    vm["killing"]()
    stats = vm.stats
    by_name = {e.name: e.bytes for e in stats.timeline}
    assert by_name["a"] == NBYTES
    assert by_name["at"] == 2 * NBYTES  # the input and its transpose coexist
    assert by_name["k0"] == NBYTES
    assert by_name["s0"] == 0  # handed off to the sink: no longer the VM's
    assert stats.peak_bytes == 2 * NBYTES and stats.peak_binding == "at"
    assert stats.current_bytes == 0


def test_the_same_meter_without_kills() -> None:
    vm = Checkpoint().vm()
    vm["no_kills"]()
    by_name = {e.name: e.bytes for e in vm.stats.timeline}
    assert by_name["at"] == 2 * NBYTES and by_name["bt"] == 2 * NBYTES
    assert by_name["b"] == NBYTES  # input 0 and output 0 are both gone when input 1 arrives
    assert vm.stats.peak_bytes == 2 * NBYTES


def test_a_slice_does_not_pin_its_input() -> None:
    ckpt = Checkpoint()
    vm = ckpt.vm()
    vm["slicing"]()
    assert ckpt.alive_at_get[1] == []  # the (1, 128) row is a copy, not a view of input 0
    assert ckpt.outputs[0].base is None and ckpt.outputs[0].shape == (1, M)
    assert vm.stats.peak_bytes == NBYTES + M * 4


@I.ir_module
class Chain:
    @R.function
    def main(
        params: R.Tuple(R.Tensor((256, 128), "float32"), R.Tensor((256, 128), "float32")),
    ) -> R.Tuple(R.Tensor((256, 128), "float32"), R.Tensor((256, 128), "float32")):
        x = params[0]
        y = params[1]
        x1 = R.multiply(x, x)
        x2 = R.add(x1, x1)
        x3 = R.add(x2, x2)
        y1 = R.add(y, x3)
        out = (y, y1)
        return out


def test_a_program_without_kills_frees_after_last_use() -> None:
    vm = VirtualMachine(Chain)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, N, M)).astype(np.float32)
    y_out, y1 = vm["main"]((x, y))
    assert y_out is y  # a pass-through output is the input itself
    np.testing.assert_array_equal(y1, y + (x * x + x * x) * 2)
    by_name = {e.name: e.bytes for e in vm.stats.timeline}
    # inputs held while alive in the frame; each step holds its operand and its result only
    assert by_name["(params)"] == 2 * NBYTES
    assert by_name["x1"] == 3 * NBYTES
    assert by_name["x2"] == 3 * NBYTES  # x1 is dropped after x2, x went after x1
    assert by_name["y1"] == 3 * NBYTES
    assert vm.stats.peak_bytes == 3 * NBYTES
    assert vm.stats.current_bytes == 0


def test_stats_restart_with_every_call() -> None:
    vm = VirtualMachine(Chain)
    args: Any = (np.zeros((N, M), np.float32), np.zeros((N, M), np.float32))
    vm["main"](args)
    first = len(vm.stats.timeline)
    vm["main"](args)
    assert len(vm.stats.timeline) == first
