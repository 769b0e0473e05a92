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
from tests.runtime.test_native_cast16 import LOOPS, loops

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)

FLOAT8 = [np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)]


@pytest.fixture(params=LOOPS)
def wide(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test runs by the AVX-512 loops, the AVX2 ones and the portable ones."""
    with loops(request.param) as vector:
        yield vector


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


TARGETS = [*FLOAT8, np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)]


@pytest.mark.parametrize("src", FLOAT8, ids=str)
@pytest.mark.parametrize("dst", [*TARGETS, np.dtype(np.float64)], ids=str)
def test_float8_to_every_float_at_every_short_length(
    wide: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """Every float8 source to every other float, in lengths 0 to 200 from unaligned starts (a
    partial vector alone, whole vectors and a tail), as ml_dtypes casts them."""
    if src == dst:
        pytest.skip("no cast")
    codes = np.random.default_rng(5).permutation(np.tile(np.arange(256, dtype=np.uint8), 2))
    room = np.empty(256, dst)
    for n in range(201):
        start = n % 7
        x = codes[start : start + n].view(src)
        out = room[start % 3 : start % 3 + n]
        out.view(f"u{dst.itemsize}").fill(0x5A)
        assert native.cast(x, out)
        with np.errstate(all="ignore"):
            _assert_same_bits(out, x.astype(dst))


@pytest.mark.parametrize("size", [1, 2], ids=["bytes", "words"])
def test_byte_code_lookups_of_any_table_at_every_short_length(wide: bool, size: int) -> None:
    """`lookup` of byte codes into a table of random 1- or 2-byte entries (every bit of every
    entry matters), each length 0 to 200 and one of 100003 codes, against numpy's indexing."""
    from lazyparams.runtime import _native

    rng = np.random.default_rng(11)
    table = rng.integers(0, 1 << (8 * size), 256, dtype=np.uint32).astype(f"u{size}")
    codes = rng.integers(0, 256, 100003 + 9, dtype=np.uint32).astype(np.uint8)
    for n in [*range(201), 100003]:
        x = codes[n % 9 : n % 9 + n]
        out = np.full(n + 1, 0x5A, table.dtype)[1:]
        _native.lookup(x, out, table)
        _assert_same_bits(out, table[x])
