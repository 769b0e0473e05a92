"""The compiled casts between the 16-bit floats, to float32, and float16 to float64
(`_native.cast16`, through `native.cast`) bit for bit against numpy's and ml_dtypes' own
casts: every 16-bit pattern, by the AVX-512, AVX2 and portable loops, at every offset of a
vector."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.runtime import fast, native

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
F64 = np.dtype(np.float64)
PAIRS = [(BF16, F16), (BF16, F32), (F16, F32), (F16, BF16), (F16, F64)]

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)


LOOPS = ["avx512", "avx2", "portable"]
"""The loops a cast can run by: AVX-512 (where the CPU has F and BW; VBMI for lookups), AVX2
with F16C (the widest the CPU has, up to AVX2), or the portable C loops."""


@contextlib.contextmanager
def loops(which: str) -> Iterator[bool]:
    """The compiled casts limited to the `which` of LOOPS (on a CPU without them, the widest it
    has below); yields whether the CPU's vector loops are in use."""
    from lazyparams.runtime import _native

    vector = which != "portable"
    before, before_512 = _native.use_f16c(vector), _native.use_avx512(which == "avx512")
    try:
        with native.use_native(True):
            yield vector
    finally:
        _native.use_f16c(before)
        _native.use_avx512(before_512)


@pytest.fixture(params=LOOPS)
def f16c(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test runs by the AVX-512 loops, the AVX2 ones and the portable ones."""
    with loops(request.param) as vector:
        yield vector


def _patterns() -> np.ndarray:
    """All 65536 16-bit patterns, then again reversed and shifted by 3, so that every pattern
    also meets the vector loops at another offset, next to other values (NaNs among them)."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    return np.concatenate([every, every[::-1][3:], every[:3]])


def _words(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _assert_same_bits(got: np.ndarray, want: np.ndarray, inputs: np.ndarray) -> None:
    bad = np.flatnonzero(_words(got) != _words(want))
    assert bad.size == 0, (
        f"{bad.size} differ; inputs {[hex(v) for v in inputs[bad[:6]]]}: got "
        f"{[hex(v) for v in _words(got)[bad[:6]]]}, want {[hex(v) for v in _words(want)[bad[:6]]]}"
    )


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=lambda d: str(d))
def test_every_pattern_casts_as_numpy_and_ml_dtypes_do(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    from lazyparams.runtime import _native

    codes = _patterns()
    with np.errstate(all="ignore"):
        want = codes.view(src).astype(dst)
    got = np.full(codes.shape, 7, _words(want).dtype).view(dst)
    _native.cast16(f"{src}>{dst}", codes, _words(got))
    _assert_same_bits(got, want, codes)


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=lambda d: str(d))
def test_the_kernels_take_the_direct_cast_for_every_length(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fast.cast` runs the compiled cast16 (not the table) on 2-D arrays of lengths around
    the vector width, heads and tails included, and gives numpy's bits."""
    from lazyparams.runtime import _native

    fast.cast(np.zeros(8, src), dst)  # the one-time agreement check runs before the spy
    calls: list[str] = []
    real = _native.cast16
    monkeypatch.setattr(_native, "cast16", lambda k, x, o: (calls.append(k), real(k, x, o)))
    rng = np.random.default_rng(5)
    for n in (1, 7, 8, 9, 15, 16, 17, 1000):
        codes = rng.integers(0, 1 << 16, (3, n), dtype=np.uint32).astype(np.uint16)
        x = codes.view(src)
        with np.errstate(all="ignore"):
            want = x.astype(dst)
        _assert_same_bits(fast.cast(x, dst), want, codes.reshape(-1))
    assert calls == [f"{src}>{dst}"] * 8


def test_float32_values_round_trip_through_bfloat16_and_float16(f16c: bool) -> None:
    """Random float32 (every exponent, signs, NaNs) cast to bfloat16 then float16, and float16
    then bfloat16, as numpy and ml_dtypes cast them."""
    raw = np.random.default_rng(11).integers(0, 1 << 32, 1 << 16, dtype=np.uint64)
    x = raw.astype(np.uint32).view(F32)
    with np.errstate(all="ignore"):
        for first, second in ((BF16, F16), (F16, BF16)):
            mid = x.astype(first)
            _assert_same_bits(fast.cast(mid, second), mid.astype(second), _words(mid))


def test_float32_to_float16_and_bfloat16_on_special_and_random_values(f16c: bool) -> None:
    """The float32 casts take the same CPU switch: random bits (every exponent, NaNs with any
    payload), then every value next to a rounding boundary of float16 and bfloat16."""
    raw = np.random.default_rng(12).integers(0, 1 << 32, 1 << 17, dtype=np.uint64)
    near = np.arange(1 << 16, dtype=np.uint64) << 16  # the halfway bits of bfloat16 below
    bits = np.concatenate([raw, near, near | 0x8000, near | 0x7FFF, near | 0x1000, near + 1])
    x = bits.astype(np.uint32).view(F32)
    for dst in (F16, BF16):
        out = np.empty(x.shape, dst)
        assert native.cast(x, out)
        with np.errstate(all="ignore"):
            _assert_same_bits(out, x.astype(dst), _words(x))


def test_non_contiguous_inputs_fall_back_and_stay_exact(f16c: bool) -> None:
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(256, 256)
    for x in (codes.view(BF16)[:, ::2], codes.view(BF16).T, codes.view(F16)[::3]):
        out = np.empty(x.shape, F16 if x.dtype == BF16 else F32)
        assert not native.cast(x, out)
        with np.errstate(all="ignore"):
            want = x.astype(out.dtype)
        _assert_same_bits(fast.cast(x, out.dtype), want, _words(x).reshape(-1))


def test_a_bad_kind_or_item_size_is_refused() -> None:
    from lazyparams.runtime import _native

    x = np.zeros(8, np.uint16)
    with pytest.raises(ValueError, match="expected kind"):
        _native.cast16("float16>int8", x, np.zeros(8, np.uint16))
    with pytest.raises(ValueError, match="4-byte items"):
        _native.cast16("float16>float32", x, np.zeros(8, np.uint16))


def test_four_threads_cast_at_once_into_pooled_outputs() -> None:
    """The loops run without the GIL and the pool hands out and takes back buffers from several
    threads: every thread still gets numpy's bits, and no output is shared."""
    import concurrent.futures
    import threading

    import lazyparams.op  # noqa: F401  (registers the ops)
    from lazyparams.runtime import run_kernel
    from lazyparams.runtime.pool import BUFFERS

    pairs = PAIRS[:4]  # one a thread
    rng = np.random.default_rng(17)
    codes = [
        rng.integers(0, 1 << 16, (512, 1024), dtype=np.uint32).astype(np.uint16) for _ in pairs
    ]
    barrier = threading.Barrier(len(pairs))

    def work(i: int) -> int:
        src, dst = pairs[i]
        x = codes[i].view(src)
        with np.errstate(all="ignore"):
            want = x.astype(dst)
        barrier.wait()
        for _ in range(4):
            got = run_kernel("astype", [x], {"dtype": str(dst)})
            _assert_same_bits(got, want, codes[i].reshape(-1))
        return i

    with BUFFERS.watch(lambda: 1 << 30), concurrent.futures.ThreadPoolExecutor(4) as threads:
        assert sorted(threads.map(work, range(len(pairs)))) == list(range(len(pairs)))
