"""The blocked transposes and chunked casts of `runtime.fast`, bit for bit against numpy.

These are the numpy loops (the compiled ones are off here; test_native.py checks them against
these). Tiles and chunks are shrunk in most tests so that small arrays cross many tile and chunk
edges; casts from 8- and 16-bit floats are checked on every bit pattern, casts from float32 on
every rounding class of the narrow formats (each top-16-bit pattern with assorted low bits).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyparams.runtime import fast, native

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
NARROW = [F16, BF16, E4M3, E5M2]
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True, scope="module")
def numpy_loops() -> Iterator[None]:
    with native.use_native(False):
        yield


@pytest.fixture
def small_tiles(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(fast, "TILE_ROWS", 5)
    monkeypatch.setattr(fast, "ALIASED_TILE_ROWS", 3)
    monkeypatch.setattr(fast, "TILE_BYTES", 48)
    monkeypatch.setattr(fast, "CHUNK", 37)
    monkeypatch.setattr(fast, "MIN_TILED", 1)
    yield


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))


# Transposes ------------------------------------------------------------------------------------

SHAPES = [(70, 70), (65, 130), (3, 80, 90), (80, 3, 90), (2, 70, 3, 70), (1, 5, 1, 7), (64, 64, 2)]


@pytest.mark.usefixtures("small_tiles")
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float16, np.float64])
def test_permute_dims_matches_numpy_for_every_permutation(
    shape: tuple[int, ...], dtype: Any
) -> None:
    x = (RNG.standard_normal(shape) * 100).astype(dtype)
    for axes in itertools.permutations(range(len(shape))):
        got = fast.permute_dims(x, axes)
        assert got.flags.c_contiguous and not np.may_share_memory(got, x)
        np.testing.assert_array_equal(got, np.transpose(x, axes))


def test_permute_dims_default_axes_empty_scalar_and_strided_inputs() -> None:
    x = RNG.standard_normal((90, 70)).astype(np.float32)
    np.testing.assert_array_equal(fast.permute_dims(x, None), x.T)
    np.testing.assert_array_equal(fast.permute_dims(x[::-2], (1, 0)), x[::-2].T)
    np.testing.assert_array_equal(fast.permute_dims(x.T, (-1, 0)), x)
    assert fast.permute_dims(np.zeros((0, 5)), (1, 0)).shape == (5, 0)
    scalar = fast.permute_dims(np.array(3.0), ())
    assert scalar.shape == () and scalar == 3.0


def test_merge_axes_collapses_neighbours_and_unit_axes() -> None:
    assert fast.merge_axes((2, 3, 4), (2, 0, 1)) == ((6, 4), [1, 0])
    assert fast.merge_axes((1, 5, 1, 7), (3, 2, 1, 0)) == ((5, 7), [1, 0])
    assert fast.merge_axes((2, 3, 4, 5), (0, 2, 1, 3)) == ((2, 3, 4, 5), [0, 2, 1, 3])
    assert fast.merge_axes((2, 3, 4), (0, 1, 2)) == ((24,), [0])


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 9), min_size=0, max_size=4),
    data=st.data(),
    rows=st.integers(1, 6),
    row_bytes=st.integers(1, 64),
)
def test_permute_dims_property(shape: list[int], data: Any, rows: int, row_bytes: int) -> None:
    axes = data.draw(st.permutations(range(len(shape))))
    x = np.arange(int(np.prod(shape)), dtype=np.int16).reshape(shape)
    old = fast.TILE_ROWS, fast.ALIASED_TILE_ROWS, fast.TILE_BYTES, fast.MIN_TILED
    fast.TILE_ROWS, fast.ALIASED_TILE_ROWS, fast.TILE_BYTES, fast.MIN_TILED = (
        rows,
        rows,
        row_bytes,
        1,
    )
    try:
        got = fast.permute_dims(x, axes)
    finally:
        fast.TILE_ROWS, fast.ALIASED_TILE_ROWS, fast.TILE_BYTES, fast.MIN_TILED = old
    np.testing.assert_array_equal(got, np.transpose(x, axes))


def test_permute_dims_refuses_a_bad_permutation_or_output() -> None:
    with pytest.raises(ValueError, match=r"expected a permutation of 2 axes, got \(0, 0\)"):
        fast.permute_dims(np.zeros((2, 3)), (0, 0))
    with pytest.raises(ValueError, match="expected a C-contiguous out of the permuted shape"):
        fast.permute_dims_into(np.zeros((2, 3)), (1, 0), np.zeros((2, 3)))


# Casts -----------------------------------------------------------------------------------------


def _all_patterns(dtype: np.dtype[Any]) -> np.ndarray:
    return (
        np.arange(1 << (8 * dtype.itemsize), dtype=np.uint32)
        .astype(f"u{dtype.itemsize}")
        .view(dtype)
    )


def _astype(x: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("src", NARROW, ids=str)
def test_casts_from_narrow_floats_on_every_bit_pattern(src: np.dtype[Any]) -> None:
    x = _all_patterns(src)
    for dst in [F32, np.dtype(np.float64), *NARROW]:
        _same_bits(fast.cast(x, dst), _astype(x, dst))


def _float32_rounding_classes() -> np.ndarray:
    """Every top-16-bit pattern with low bits at, below and above the halfway points that
    float16 and the 8-bit floats round at, and random bits."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = [0, 1, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x3000, 0x7FFF, 0x8000, 0xFFFF]
    random = RNG.integers(0, 1 << 32, 1 << 16, dtype=np.uint32)
    return np.concatenate([high | low for low in lows] + [random]).view(np.float32)


@pytest.mark.parametrize("dst", NARROW, ids=str)
def test_casts_from_float32_in_every_rounding_class(dst: np.dtype[Any]) -> None:
    x = _float32_rounding_classes()
    _same_bits(fast.cast(x, dst), _astype(x, dst))


@pytest.mark.usefixtures("small_tiles")
@pytest.mark.parametrize(("src", "dst"), [(F32, F16), (F32, E4M3), (F16, F32), (E5M2, BF16)])
def test_casts_cross_chunk_edges_and_keep_the_shape(src: Any, dst: Any) -> None:
    x = _astype(RNG.standard_normal((7, 3, 11)).astype(np.float32) * 300, src)
    specials = _astype(np.array([0, -0.0, np.inf, np.nan, 1e-6, -1e5], np.float32), src)
    flat = x.reshape(-1)
    flat[::13] = np.resize(specials, flat[::13].size)
    _same_bits(fast.cast(x, dst), _astype(x, dst))


def test_casts_without_a_fast_path_and_of_strided_inputs() -> None:
    x = RNG.standard_normal((6, 8)).astype(np.float32) * 200
    for dst in (np.int8, np.uint8, np.int32, np.float64, BF16, np.float32):
        _same_bits(fast.cast(x, np.dtype(dst)), _astype(x, np.dtype(dst)))
    _same_bits(fast.cast(x[:, ::3], F16), x[:, ::3].astype(F16))
    assert fast.cast(np.zeros((0, 3), np.float32), E4M3).shape == (0, 3)


def test_cast_into_refuses_a_shape_mismatch() -> None:
    with pytest.raises(ValueError, match=r"expected out of shape \(2, 3\), got \(3, 2\)"):
        fast.cast_into(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float16))
