"""The float8 casts of the compiled extension, by the AVX2 loops and by the portable ones: every
float8 code to float32 (at every offset of the vector loops), and float32 edge and random
values (NaNs, infinities, subnormals, overflow, ties) to float8, bit for bit as ml_dtypes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.runtime import native
from tests.runtime.test_native import _float32_patterns

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)

FLOAT8 = [np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)]


@pytest.fixture(params=[True, False], ids=["avx2", "portable"])
def wide(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test runs with the CPU's vector loops (where it has them) and without."""
    from lazyparams.runtime import _native

    before = _native.use_f16c(request.param)
    with native.use_native(True):
        yield bool(request.param)
    _native.use_f16c(before)


def _assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    g, w = got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{bad.size} differ, first at {bad[:6]}: {g[bad[:6]]} vs {w[bad[:6]]}"


@pytest.mark.parametrize("src", FLOAT8, ids=str)
def test_every_code_casts_to_float32_as_ml_dtypes(wide: bool, src: np.dtype[Any]) -> None:
    every = np.arange(256, dtype=np.uint32).astype(np.uint8)
    for offset in range(9):  # each code meets the vector loop at every lane, and the tail
        codes = np.concatenate([every[offset:], every[:offset], every[::-1]]).view(src)
        out = np.empty(codes.shape, np.float32)
        assert native.cast(codes, out)
        with np.errstate(all="ignore"):
            _assert_same_bits(out, codes.astype(np.float32))


@pytest.mark.parametrize("dst", FLOAT8, ids=str)
def test_float32_edges_and_random_values_cast_as_ml_dtypes(wide: bool, dst: np.dtype[Any]) -> None:
    x = _float32_patterns()
    out = np.empty(x.shape, dst)
    assert native.cast(x, out)
    with np.errstate(all="ignore"):
        _assert_same_bits(out, x.astype(dst))
    tail = x[: 32 * 7 + 5]  # the scalar tail after the 32-wide loop
    out = np.empty(tail.shape, dst)
    assert native.cast(tail, out)
    with np.errstate(all="ignore"):
        _assert_same_bits(out, tail.astype(dst))


def test_the_float8_kind_and_table_are_checked() -> None:
    from lazyparams.runtime import _native

    codes, out = np.zeros(8, np.uint8), np.zeros(8, np.uint32)
    with pytest.raises(ValueError, match="expected kind"):
        _native.cast8("float8_e4m3fn>float64", codes, out, np.zeros(256, np.uint32))
    with pytest.raises(ValueError, match="256 codes"):
        _native.cast8("float8_e5m2>float32", codes, out, np.zeros(255, np.uint32))
