"""The order an unstable introsort (libstdc++'s `std::sort`) gives, equal keys included, in numpy.

torch sorts on the CPU with `std::sort`, so among equal keys its order is neither the input's
nor a stable one: it is whatever the median-of-three partitions left behind. Merge methods that
pick elements by rank (magnitude top-k, ranks per row) must pick the same ones among ties, so
this module replays the algorithm: each partition step of every pending range at once
(vectorised over ranges and rows), the rare heapsort fallback element by element, and the
final insertion sort as a stable sort of the partitioned rows. Keys are compared with `<`
(ascending); a caller wanting another order passes keys that sort so. Imports numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

THRESHOLD = 16
"""Ranges of at most this many elements are left to the final insertion sort."""


def depth_limit(n: int) -> int:
    """How many partition levels a range of n elements may take before the heapsort fallback:
    twice the floor of log2(n)."""
    return 2 * (n.bit_length() - 1) if n > 0 else 0


def sort_order(keys: Array) -> Array:
    """For each row of the 2-D `keys`, the permutation `std::sort` leaves: `order[r, p]` is the
    column of the key that ends at position p of row r."""
    rows, n = keys.shape
    work = np.ascontiguousarray(keys).reshape(-1).copy()
    index = np.tile(np.arange(n, dtype=np.int64), rows)
    if n > THRESHOLD:
        first = np.arange(rows, dtype=np.int64) * n
        _introsort(work, index, first, first + n, np.full(rows, depth_limit(n), np.int64))
    return _final_insertion(work.reshape(rows, n), index.reshape(rows, n))


def leading(keys: Array, k: int) -> Array:
    """A bool mask over the 1-D `keys`: the elements `std::sort` puts at positions [0, k).

    Only the range holding the boundary is partitioned further, as a selection would: which
    elements end before position k is settled as soon as a cut falls at k or the range is small.
    """
    n = keys.shape[0]
    mask = np.zeros(n, dtype=bool)
    if k <= 0 or n == 0:
        return mask
    if k >= n:
        mask[:] = True
        return mask
    work, index = keys.copy(), np.arange(n, dtype=np.int64)
    first, last, depth = 0, n, depth_limit(n)
    while last - first > THRESHOLD and first < k < last:
        if depth == 0:
            _heapsort_range(work, index, first, last)
            break
        depth -= 1
        cut = _partition_range(work, index, first, last)
        first, last = (first, cut) if k < cut else (cut, last)
    mask[index[:first]] = True
    if first < k < last:
        order = np.argsort(work[first:last], kind="stable")
        mask[index[first:last][order[: k - first]]] = True
    return mask


def _introsort(work: Array, index: Array, first: Array, last: Array, depth: Array) -> None:
    """Partition every range [first, last) until each holds at most THRESHOLD elements or has
    no depth left (then heapsort it), as the recursion of `std::__introsort_loop` does."""
    while first.size:
        spent = depth == 0
        for lo, hi in zip(first[spent].tolist(), last[spent].tolist(), strict=True):
            _heapsort_range(work, index, lo, hi)
        first, last, depth = first[~spent], last[~spent], depth[~spent] - 1
        cut = _partition(work, index, first, last)
        first = np.concatenate([cut, first])
        last = np.concatenate([last, cut])
        depth = np.concatenate([depth, depth])
        keep = last - first > THRESHOLD
        first, last, depth = first[keep], last[keep], depth[keep]


def _partition(work: Array, index: Array, first: Array, last: Array) -> Array:
    """One `__unguarded_partition_pivot` step of each range; the cut of each.

    The median of three moves to `first` and is the pivot. Scanning from the left stops at keys
    >= pivot, from the right at keys <= pivot (the pivot itself stops it at `first`); the k-th
    stop of each side swap while the left one is before the right one. The cut is where the
    left scan stops after the last swap: its next stop, or the last right stop, which now holds
    a key >= pivot, whichever comes first.
    """
    _median_to_first(work, index, first, last)
    lengths = last - first
    offsets = np.cumsum(lengths) - lengths  # where each range starts among all positions
    position = np.arange(int(lengths.sum())) + np.repeat(first - offsets, lengths)
    values, pivots = work[position], np.repeat(work[first], lengths)
    lefts = values >= pivots
    lefts[offsets] = False  # the pivot's own place stops no scan from the left
    rights = values <= pivots
    n_left = np.add.reduceat(lefts, offsets, dtype=np.int64)
    n_right = np.add.reduceat(rights, offsets, dtype=np.int64)
    left_at, right_at = position[lefts], position[rights]
    left_of = np.repeat(np.arange(first.size), n_left)
    left_start = np.cumsum(n_left) - n_left
    right_end = np.cumsum(n_right) - 1  # the k-th stop from the right: right_end - k
    k = np.arange(left_at.size) - left_start[left_of]
    paired = k < n_right[left_of]
    partner = np.where(paired, right_end[left_of] - k, 0)
    swaps = paired & (left_at < right_at[partner])
    i, j = left_at[swaps], right_at[partner[swaps]]
    work[i], work[j] = work[j], work[i].copy()
    index[i], index[j] = index[j], index[i].copy()
    done = np.bincount(left_of[swaps], minlength=first.size)
    big = np.iinfo(np.int64).max
    next_left = np.where(done < n_left, _at(left_at, left_start + done), big)
    last_right = np.where(done > 0, _at(right_at, right_end - done + 1), big)
    return np.minimum(next_left, last_right)


def _partition_range(work: Array, index: Array, first: int, last: int) -> int:
    """`_partition` of the one range [first, last), on views of it (no per-element range ids:
    a selection partitions ranges as long as the whole tensor)."""
    _median_to_first(work, index, np.array([first]), np.array([last]))
    span = work[first:last]
    pivot = span[0]
    lefts = np.flatnonzero(span[1:] >= pivot) + (first + 1)
    rights = np.flatnonzero(span <= pivot)[::-1] + first
    paired = min(lefts.size, rights.size)
    done = int(np.count_nonzero(lefts[:paired] < rights[:paired]))
    i, j = lefts[:done], rights[:done]
    work[i], work[j] = work[j], work[i].copy()
    index[i], index[j] = index[j], index[i].copy()
    big = np.iinfo(np.int64).max
    next_left = int(lefts[done]) if done < lefts.size else big
    last_right = int(rights[done - 1]) if done > 0 else big
    return min(next_left, last_right)


def _at(values: Array, where: Array) -> Array:
    """`values[where]`, the indices clipped into range (the caller masks those it clipped)."""
    return values[np.clip(where, 0, max(values.size - 1, 0))] if values.size else where * 0


def _median_to_first(work: Array, index: Array, first: Array, last: Array) -> None:
    """`std::__move_median_to_first(first, first + 1, mid, last - 1)` for each range."""
    a, b, c = first + 1, first + (last - first) // 2, last - 1
    ka, kb, kc = work[a], work[b], work[c]
    ab, bc, ac = ka < kb, kb < kc, ka < kc
    when_ab = np.where(bc, b, np.where(ac, c, a))
    otherwise = np.where(ac, a, np.where(bc, c, b))
    median = np.where(ab, when_ab, otherwise)
    work[first], work[median] = work[median], work[first].copy()
    index[first], index[median] = index[median], index[first].copy()


def _final_insertion(work: Array, index: Array) -> Array:
    """The final insertion sort: it moves a key only past greater ones, so on ranges already
    partitioned it is a stable sort of each row."""
    order = np.argsort(work, axis=1, kind="stable")
    return np.take_along_axis(index, order, axis=1)


def _heapsort_range(work: Array, index: Array, first: int, last: int) -> None:
    """`std::partial_sort(first, last, last)`: make_heap, then sort_heap, element by element
    (the fallback of a range whose partitions went too deep; rare, so plain Python)."""
    keys = work[first:last].tolist()
    items = index[first:last].tolist()
    heap = list(zip(keys, items, strict=True))
    size = len(heap)
    for parent in range((size - 2) // 2, -1, -1):
        _adjust_heap(heap, parent, size, heap[parent])
    for end in range(size - 1, 0, -1):
        value = heap[end]
        heap[end] = heap[0]
        _adjust_heap(heap, 0, end, value)
    work[first:last] = [key for key, _ in heap]
    index[first:last] = [item for _, item in heap]


def _adjust_heap(heap: list[Any], hole: int, size: int, value: Any) -> None:
    """`std::__adjust_heap`: sift the hole down to a leaf along the larger children, then push
    `value` up from there (`std::__push_heap`)."""
    top, child = hole, hole
    while child < (size - 1) // 2:
        child = 2 * (child + 1)
        if heap[child][0] < heap[child - 1][0]:
            child -= 1
        heap[hole] = heap[child]
        hole = child
    if size % 2 == 0 and child == (size - 2) // 2:
        child = 2 * (child + 1)
        heap[hole] = heap[child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and heap[parent][0] < value[0]:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = value
