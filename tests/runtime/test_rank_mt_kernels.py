"""The kernels of R.sort_rank, R.rank_mask (introsort order, NaN placement, axes, dtypes) and
of R.mt_uniform, R.mt_skip (the MT19937 stream torch's CPU generator draws)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import run_kernel
from lazyparams.runtime.introsort import sort_order

TORCH_RAND_42 = [0.8822692632675171, 0.9150039553642273, 0.38286375999450684, 0.9593056440353394]
"""`torch.manual_seed(42); torch.rand(4)` (torch 2.13, CPU)."""
TORCH_BERNOULLI_7 = [0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 0]
"""`torch.manual_seed(7); torch.bernoulli(torch.full((12,), 0.5))`."""


def seeded_state(seed: int) -> np.ndarray:
    """R.mt_seed's state: the one `torch.manual_seed(seed)` starts from."""
    state = run_kernel("mt_seed", [], {"seed": seed})
    assert state.dtype == np.uint32 and state.shape == (625,)
    return state


def _ranks(keys: np.ndarray) -> np.ndarray:
    order = sort_order(keys.reshape(-1, keys.shape[-1]))
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(order.shape[1])[None, :], axis=1)
    return ranks.reshape(keys.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_sort_rank_along_an_axis(dtype: object) -> None:
    x = np.random.default_rng(1).integers(0, 4, size=(3, 40, 5)).astype(dtype)
    got = run_kernel("sort_rank", [x], {"axis": 1, "descending": False})
    want = np.moveaxis(_ranks(np.moveaxis(x.astype(np.float64), 1, -1)), -1, 1)
    assert got.dtype == np.int64 and got.shape == x.shape
    np.testing.assert_array_equal(got, want)
    down = run_kernel("sort_rank", [x], {"axis": -1, "descending": True})
    np.testing.assert_array_equal(down, _ranks(-x.astype(np.float64)))


def test_rows_are_ranked_a_few_at_a_time_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lazyparams.runtime import rank_kernels

    x = np.random.default_rng(4).integers(0, 3, size=(7, 30)).astype(np.float32)
    whole = run_kernel("sort_rank", [x], {"axis": 1, "descending": False})
    monkeypatch.setattr(rank_kernels, "ROWS_AT_ONCE", 64)  # two rows at a time
    np.testing.assert_array_equal(
        run_kernel("sort_rank", [x], {"axis": 1, "descending": False}), whole
    )
    np.testing.assert_array_equal(whole, _ranks(x.astype(np.float64)))


def test_nan_sorts_last_ascending_and_first_descending() -> None:
    x = np.float32([1, np.nan, 0, 2, np.nan, -np.inf, np.inf])
    up = run_kernel("sort_rank", [x], {"axis": 0, "descending": False})
    assert up.tolist() == [2, 5, 1, 3, 6, 0, 4]
    down = run_kernel("sort_rank", [x], {"axis": 0, "descending": True})
    assert down.tolist() == [4, 0, 5, 3, 1, 6, 2]
    mask = run_kernel("rank_mask", [x], {"begin": 0, "end": 2, "descending": True})
    assert mask.tolist() == [False, True, False, False, True, False, False]


def test_rank_mask_marks_a_range_of_the_whole_tensor_sorted() -> None:
    x = np.random.default_rng(2).integers(0, 3, size=(8, 9)).astype(ml_dtypes.bfloat16)
    order = sort_order(x.astype(np.float64).reshape(1, -1))[0]
    for begin, end in [(0, 0), (0, 5), (10, 40), (70, 72), (3, 500)]:
        got = run_kernel("rank_mask", [x], {"begin": begin, "end": end, "descending": False})
        want = np.zeros(x.size, bool)
        want[order[begin:end]] = True
        assert got.shape == x.shape and got.dtype == np.bool_
        np.testing.assert_array_equal(got.reshape(-1), want)


def test_uniforms_are_torchs_stream_after_manual_seed() -> None:
    state = seeded_state(42)
    got = run_kernel("mt_uniform", [state], {"shape": (2, 2)})
    assert got.dtype == np.float32 and got.shape == (2, 2)
    assert got.reshape(-1).tolist() == TORCH_RAND_42
    coin = run_kernel("mt_uniform", [seeded_state(7)], {"shape": (12,)}) < np.float32(0.5)
    assert coin.astype(int).tolist() == TORCH_BERNOULLI_7


def test_the_seeded_state_is_init_genrand_of_the_seed() -> None:
    state = seeded_state(2**32 - 1)
    assert state[0] == 2**32 - 1 and state[624] == 624  # no word drawn yet
    want = (1812433253 * (int(state[0]) ^ (int(state[0]) >> 30)) + 1) & 0xFFFFFFFF
    assert state[1] == want


def test_uniforms_are_the_low_24_bits_of_each_32_bit_draw() -> None:
    raw = np.random.RandomState(5).randint(0, 2**32, size=1000, dtype=np.uint64)
    want = ((raw & 0xFFFFFF).astype(np.float64) * 2.0**-24).astype(np.float32)
    got = run_kernel("mt_uniform", [seeded_state(5)], {"shape": (10, 100)})
    np.testing.assert_array_equal(got.reshape(-1), want)


def test_skipping_then_drawing_continues_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from lazyparams.runtime import mt_kernels

    monkeypatch.setattr(mt_kernels, "SLICE", 64)  # several slices per draw
    state = seeded_state(3)
    whole = run_kernel("mt_uniform", [state], {"shape": (2000,)})
    later = run_kernel("mt_skip", [state], {"count": 1234})
    assert later.dtype == np.uint32 and later.shape == (625,)
    rest = run_kernel("mt_uniform", [later], {"shape": (766,)})
    np.testing.assert_array_equal(rest, whole[1234:])
    np.testing.assert_array_equal(run_kernel("mt_skip", [state], {"count": 0}), state)


def test_what_is_no_state_is_refused() -> None:
    with pytest.raises(RuntimeExecError, match=r"R\.mt_uniform: expected an MT19937 state"):
        run_kernel("mt_uniform", [np.zeros(625, np.int64)], {"shape": (2,)})
    bad = seeded_state(1)
    bad[624] = 700
    with pytest.raises(RuntimeExecError, match=r"R\.mt_skip: expected an MT19937 state"):
        run_kernel("mt_skip", [bad], {"count": 2})
