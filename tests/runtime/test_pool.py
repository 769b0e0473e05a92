"""The kernels' buffer pool: freed outputs are reused, only within the watched program's
headroom; no buffer is reused while any view of it lives; the VM's measured peak stays the
predicted one."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.analysis import estimate_peak_memory
from lazyparams.runtime import VirtualMachine, run_kernel
from lazyparams.runtime.pool import BUFFERS, MIN_BYTES, BufferPool
from lazyparams.script import ir as I
from lazyparams.script import relax as R

SHAPE = (1024, 512)  # 2 MiB of float32, 1 MiB of float16
NBYTES = 1024 * 512 * 4


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_unwatched_the_pool_gives_plain_arrays_and_keeps_nothing() -> None:
    pool = BufferPool()
    a = pool.empty(SHAPE, np.float32)
    assert a.flags.owndata and a.shape == SHAPE
    del a
    assert pool.free_bytes == 0


def test_a_freed_buffer_is_reused_for_an_output_of_its_byte_size() -> None:
    pool = BufferPool()
    with pool.watch(lambda: 1 << 30):
        a = pool.empty(SHAPE, np.float32)
        a[...] = 1
        where = _address(a)
        assert pool.owns(a.base) and not a.flags.owndata
        del a
        assert pool.free_bytes == NBYTES
        b = pool.empty((NBYTES // 2,), np.float16)  # another shape and dtype, same bytes
        assert _address(b) == where and pool.free_bytes == 0
        c = pool.empty(SHAPE, np.float32)  # b is alive: a new buffer
        assert _address(c) != where
    assert pool.free_bytes == 0


def test_a_buffer_waits_for_its_last_view() -> None:
    pool = BufferPool()
    with pool.watch(lambda: 1 << 30):
        a = pool.empty(SHAPE, np.float32)
        views = [a.view(np.uint8)[::2], memoryview(a.reshape(-1)[5:])]
        del a
        gc.collect()
        assert pool.free_bytes == 0
        views.pop()
        assert pool.free_bytes == 0
        views.clear()
        assert pool.free_bytes == NBYTES


def test_the_pool_keeps_no_more_than_the_headroom() -> None:
    pool = BufferPool()
    room = [NBYTES]
    with pool.watch(lambda: room[0]):
        a, b = pool.empty(SHAPE, np.float32), pool.empty(SHAPE, np.float32)
        del a, b
        assert pool.free_bytes == NBYTES  # the second did not fit
        room[0] = NBYTES - 1
        pool.fit()
        assert pool.free_bytes == 0


def test_two_watchers_at_once_keep_nothing_and_small_arrays_are_numpys() -> None:
    pool = BufferPool()
    with pool.watch(lambda: 1 << 30), pool.watch(lambda: 1 << 30):
        a = pool.empty(SHAPE, np.float32)
        del a
        assert pool.free_bytes == 0
    with pool.watch(lambda: 1 << 30):
        small = pool.empty((MIN_BYTES // 8,), np.float32)
        assert small.flags.owndata


def test_kernels_return_pool_buffers_without_copying_them() -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32)
    with BUFFERS.watch(lambda: 1 << 30):
        for op, attrs, want in [
            ("astype", {"dtype": "float16"}, x.astype(np.float16)),
            ("permute_dims", {"axes": (1, 0)}, x.T),
        ]:
            got = run_kernel(op, [x], attrs)
            assert BUFFERS.owns(got.base)
            np.testing.assert_array_equal(got, want)
        got = run_kernel("concat", [(x, x + 1)], {"axis": 1})
        assert BUFFERS.owns(got.base)
        np.testing.assert_array_equal(got, np.concatenate((x, x + 1), axis=1))
        del got
    assert BUFFERS.free_bytes == 0


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat_matches_numpy(axis: int) -> None:
    rng = np.random.default_rng(axis % 7)
    parts = (rng.standard_normal((96, 64)), rng.standard_normal((96, 64)))
    if axis in (0, -2):
        parts += (rng.standard_normal((5, 64)),)
    got = run_kernel("concat", [parts], {"axis": axis})
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=axis))


def test_concat_of_mixed_dtypes_promotes_as_numpy_does() -> None:
    a, b = np.ones((4, 3), np.float32), np.ones((2, 3), np.float64)
    got = run_kernel("concat", [(a, b)], {"axis": 0})
    assert got.dtype == np.float64 and got.shape == (6, 3)


@I.ir_module
class CastTwice:
    @R.function(pure=False)
    def main() -> R.Tuple:
        a = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
        a1 = R.match_cast(a, R.Tensor((1024, 512), "float32"))
        ah = R.astype(a1, "float16")
        k0 = R.vm.kill_object(a)
        k1 = R.vm.kill_object(a1)
        s0 = R.call_packed("set_item", R.prim_value(0), ah, sinfo_args=(R.Object,))
        k2 = R.vm.kill_object(ah)
        b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
        b1 = R.match_cast(b, R.Tensor((1024, 512), "float32"))
        bh = R.astype(b1, "float16")
        k3 = R.vm.kill_object(b)
        k4 = R.vm.kill_object(b1)
        s1 = R.call_packed("set_item", R.prim_value(1), bh, sinfo_args=(R.Object,))
        k5 = R.vm.kill_object(bh)
        return R.tuple()


def test_the_vm_reuses_a_written_output_and_its_peak_stays_the_predicted_one() -> None:
    """The first output, once the sink dropped it, is the second one's buffer; the meter's peak
    is the predicted peak, and the pool never held more than the headroom under that peak."""
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(SHAPE, dtype=np.float32) for _ in range(2)]
    written: list[tuple[int, np.ndarray]] = []
    free_seen: list[int] = []

    def set_item(index: int, value: Any) -> None:
        written.append((_address(value), value.copy()))  # the sink keeps a copy, not the value
        free_seen.append(BUFFERS.free_bytes)

    vm = VirtualMachine(CastTwice, {"get_item": lambda i: inputs[int(i)], "set_item": set_item})
    vm["main"]()
    assert written[0][0] == written[1][0]
    for (_, got), x in zip(written, inputs, strict=True):
        np.testing.assert_array_equal(got, x.astype(np.float16))
    predicted = estimate_peak_memory(CastTwice["main"]).peak_bytes
    assert vm.stats.peak_bytes == predicted == NBYTES + NBYTES // 2
    assert all(free <= predicted for free in free_seen)
    assert BUFFERS.free_bytes == 0  # the call's end drops what the pool kept
