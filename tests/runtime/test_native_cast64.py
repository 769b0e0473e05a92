"""The compiled casts from float64 (`_native.cast64`, through `native.cast`) bit for bit
against numpy's and ml_dtypes' own casts, by the AVX-512 loops, the AVX2 build and the
portable loops: the rounding edges of `native.float64_patterns` at every offset of a vector,
random values, short lengths (vector tails alone) and a cast through `fast.cast`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.runtime import fast, native
from tests.runtime.test_native_cast16 import LOOPS, loops
from tests.runtime.test_native_cast_streams import _assert_same_bits, _words

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)

F64 = np.dtype(np.float64)
TARGETS = [
    np.dtype(np.float16),
    np.dtype(ml_dtypes.bfloat16),
    np.dtype(ml_dtypes.float8_e4m3fn),
    np.dtype(ml_dtypes.float8_e5m2),
]


@pytest.fixture(params=LOOPS)
def vector(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test runs by the AVX-512 loops, the AVX2 ones and the portable ones."""
    with loops(request.param) as on:
        yield on


def _reference(x: np.ndarray, dst: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(dst)


@pytest.mark.parametrize("dst", TARGETS, ids=str)
def test_rounding_edges_at_every_offset_cast_as_numpy_and_ml_dtypes(
    vector: bool, dst: np.dtype[Any]
) -> None:
    """Every exponent with the mantissas that decide each rounding, NaN payloads, both signs,
    shifted so that each value meets the vector loops at each lane and in the tail."""
    x = native.float64_patterns().view(F64)
    for shift in (0, 3, 13):
        part = x[shift:]
        out = np.empty(part.shape, dst)
        _words(out).fill(0x5A)
        assert native.cast(part, out), f"float64 -> {dst} declined"
        _assert_same_bits(out, _reference(part, dst), part)


@pytest.mark.parametrize("dst", TARGETS, ids=str)
def test_random_values_and_short_lengths(vector: bool, dst: np.dtype[Any]) -> None:
    """Normal values at the scales of weights (float16's and float8's subnormals among them),
    at lengths 0 to 40 and one long one, as numpy and ml_dtypes give them."""
    rng = np.random.default_rng(23)
    x = rng.standard_normal(100_003) * np.exp2(rng.integers(-24, 12, 100_003))
    for n in [*range(41), x.size]:
        part = x[:n]
        out = np.empty(n, dst)
        assert native.cast(part, out)
        _assert_same_bits(out, _reference(part, dst), part)


def test_fast_cast_runs_the_compiled_float64_casts(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fast.cast` of a 2-D float64 array takes `cast64` for every target, numpy's bits."""
    from lazyparams.runtime import _native

    x = np.linspace(-500, 500, 3 * 1001).reshape(3, 1001)
    for dst in TARGETS:
        fast.cast(x[:1, :8], dst)  # the one-time agreement check runs before the spy
    calls: list[str] = []
    real = _native.cast64
    monkeypatch.setattr(_native, "cast64", lambda kind, *a: (calls.append(kind), real(kind, *a)))
    with native.use_native(True):
        for dst in TARGETS:
            _assert_same_bits(fast.cast(x, dst), _reference(x, dst), x)
    assert calls == [f"float64>{d}" for d in TARGETS]


def test_a_bad_kind_or_item_size_is_refused() -> None:
    from lazyparams.runtime import _native

    x = np.zeros(4, np.uint64)
    with pytest.raises(ValueError, match="float64> then float16"):
        _native.cast64("float64>float32", x, np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match="out of 1-byte items"):
        _native.cast64("float64>float8_e5m2", x, np.zeros(4, np.uint16))
