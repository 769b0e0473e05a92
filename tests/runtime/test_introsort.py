"""The vectorised introsort against a plain element-by-element one written from the algorithm
(libstdc++'s std::sort: median-of-three, unguarded partition, heapsort below the depth limit,
final insertion sort), and against orders torch's CPU argsort gave (recorded here)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.runtime import introsort

X = [2, 0, 0, 0, 0, 2, 2, 1, 0, 0, 0, 1, 1, 1, 0, 0, 2, 2, 0, 0, 1, 1, 2, 1, 1, 1, 1, 1, 0, 2]
X += [2, 2, 2, 0, 0, 1, 1, 2, 2, 0]
TORCH_ASCENDING = [1, 39, 34, 33, 28, 19, 18, 15, 14, 10, 9, 8, 2, 3, 4, 11, 36, 35, 27, 26]
TORCH_ASCENDING += [25, 24, 23, 21, 20, 12, 13, 7, 0, 22, 38, 37, 16, 32, 31, 30, 29, 17, 6, 5]
TORCH_DESCENDING = [0, 22, 29, 30, 17, 16, 31, 32, 6, 5, 37, 38, 27, 35, 26, 25, 24, 23, 21, 20]
TORCH_DESCENDING += [36, 7, 13, 12, 11, 39, 33, 34, 28, 19, 18, 15, 14, 10, 9, 8, 4, 3, 2, 1]
ROWS = [
    [3, 0, 0, 3, 3, 1, 0, 1, 0, 3, 2, 2, 0, 1, 0, 3, 1, 0, 1, 2, 2, 1, 1, 0],
    [2, 2, 2, 3, 3, 0, 2, 2, 0, 1, 1, 2, 1, 2, 2, 0, 1, 3, 3, 2, 0, 2, 0, 3],
]
TORCH_ROWS = [
    [12, 23, 17, 14, 8, 6, 1, 2, 7, 22, 21, 18, 16, 13, 5, 11, 10, 19, 20, 3, 15, 0, 9, 4],
    [22, 20, 5, 15, 8, 16, 9, 10, 12, 1, 21, 19, 14, 13, 11, 7, 6, 2, 0, 17, 18, 4, 3, 23],
]
"""`torch.argsort` (torch 2.13, CPU) of X ascending and descending, and of ROWS along dim 1."""


def test_the_order_torch_gives_equal_keys() -> None:
    keys = np.asarray([X], dtype=np.float64)
    assert introsort.sort_order(keys)[0].tolist() == TORCH_ASCENDING
    assert introsort.sort_order(-keys)[0].tolist() == TORCH_DESCENDING
    assert introsort.sort_order(np.asarray(ROWS, dtype=np.float64)).tolist() == TORCH_ROWS


def test_leading_marks_the_first_k_of_that_order() -> None:
    keys = -np.asarray(X, dtype=np.float64)
    for k in range(len(X) + 2):
        want = np.zeros(len(X), bool)
        want[TORCH_DESCENDING[:k]] = True
        np.testing.assert_array_equal(introsort.leading(keys, k), want)


# A plain introsort, one element at a time --------------------------------------------------


def plain_sort(keys: list[Any], depth: int) -> list[int]:
    """std::sort of (key, index) pairs by key, as written in libstdc++."""
    items = [(k, i) for i, k in enumerate(keys)]
    _loop(items, 0, len(items), depth)
    for i in range(1, len(items)):  # the final insertion sort
        j, value = i, items[i]
        while j > 0 and value[0] < items[j - 1][0]:
            items[j] = items[j - 1]
            j -= 1
        items[j] = value
    return [i for _, i in items]


def _loop(items: list[Any], first: int, last: int, depth: int) -> None:
    while last - first > 16:
        if depth == 0:
            items[first:last] = _heap_sorted(items[first:last])
            return
        depth -= 1
        cut = _partition_pivot(items, first, last)
        _loop(items, cut, last, depth)
        last = cut


def _partition_pivot(items: list[Any], first: int, last: int) -> int:
    a, b, c = first + 1, first + (last - first) // 2, last - 1
    ka, kb, kc = items[a][0], items[b][0], items[c][0]
    if ka < kb:
        median = b if kb < kc else c if ka < kc else a
    else:
        median = a if ka < kc else c if kb < kc else b
    items[first], items[median] = items[median], items[first]
    pivot, lo, hi = items[first][0], first + 1, last
    while True:
        while items[lo][0] < pivot:
            lo += 1
        hi -= 1
        while pivot < items[hi][0]:
            hi -= 1
        if not lo < hi:
            return lo
        items[lo], items[hi] = items[hi], items[lo]
        lo += 1


def _heap_sorted(items: list[Any]) -> list[Any]:
    heap, size = list(items), len(items)
    for parent in range((size - 2) // 2, -1, -1):
        _sift(heap, parent, size, heap[parent])
    for end in range(size - 1, 0, -1):
        value, heap[end] = heap[end], heap[0]
        _sift(heap, 0, end, value)
    return heap


def _sift(heap: list[Any], hole: int, size: int, value: Any) -> None:
    top, child = hole, hole
    while child < (size - 1) // 2:
        child = 2 * (child + 1)
        if heap[child][0] < heap[child - 1][0]:
            child -= 1
        heap[hole], hole = heap[child], child
    if size % 2 == 0 and child == (size - 2) // 2:
        child = 2 * (child + 1)
        heap[hole], hole = heap[child - 1], child - 1
    parent = (hole - 1) // 2
    while hole > top and heap[parent][0] < value[0]:
        heap[hole], hole = heap[parent], parent
        parent = (hole - 1) // 2
    heap[hole] = value


@pytest.mark.parametrize("n", [1, 2, 16, 17, 40, 257, 1000])
@pytest.mark.parametrize("levels", [1, 3, 50, 10**6])
def test_the_vectorised_sort_is_the_plain_one(n: int, levels: int) -> None:
    rng = np.random.default_rng(n * 7 + levels)
    keys = rng.integers(0, levels, size=(3, n)).astype(np.float64)
    keys[1] = np.sort(keys[1])[::-1]  # a descending row: the partitions' worst friends
    got = introsort.sort_order(keys)
    for row, order in zip(keys.tolist(), got.tolist(), strict=True):
        assert order == plain_sort(row, introsort.depth_limit(n))
    for k in (0, 1, n // 3, n - 1, n):
        want = np.zeros(n, bool)
        want[plain_sort(keys[0].tolist(), introsort.depth_limit(n))[:k]] = True
        np.testing.assert_array_equal(introsort.leading(keys[0], k), want)


@pytest.mark.parametrize("n", [40, 300])
def test_a_range_past_its_depth_limit_is_heapsorted(n: int, monkeypatch: Any) -> None:
    monkeypatch.setattr(introsort, "depth_limit", lambda size: 1)
    keys = np.random.default_rng(n).integers(0, 5, size=(2, n)).astype(np.float64)
    got = introsort.sort_order(keys)
    for row, order in zip(keys.tolist(), got.tolist(), strict=True):
        assert order == plain_sort(row, 1)
    want = np.zeros(n, bool)
    want[plain_sort(keys[0].tolist(), 1)[: n // 2]] = True
    np.testing.assert_array_equal(introsort.leading(keys[0], n // 2), want)
