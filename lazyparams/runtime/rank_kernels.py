"""numpy kernels of `R.sort_rank` and `R.rank_mask`: ranks in the order an unstable introsort
leaves equal elements (`runtime.introsort`).

Keys are the elements as float32 (float64 for float64 tensors: exact either way), negated for a
descending order; a tensor holding NaN is ranked through dense integer keys instead, so that
NaN sorts after everything ascending and before everything descending, as torch's comparators
have it.
Imports the runtime's kernel registry and `runtime.introsort`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.runtime.introsort import leading, sort_order
from lazyparams.runtime.kernels import Array, kernel


def sort_keys(x: Array, descending: bool) -> Array:
    """Keys whose ascending order (by `<`) is x's order: NaN last ascending, first descending."""
    wide = np.float64 if np.asarray(x).dtype == np.float64 else np.float32
    values = np.asarray(x, dtype=wide)
    if descending:
        values = np.negative(values)
    nan = np.isnan(values)
    if not nan.any():
        return values
    keys = np.empty(values.shape, dtype=np.int64)
    distinct, keys[~nan] = np.unique(values[~nan], return_inverse=True)
    keys[nan] = -1 if descending else distinct.size
    return keys


ROWS_AT_ONCE = 1 << 20
"""Elements whose rows are sorted together: the sort's scratch is several times their size."""


@kernel("sort_rank")
def _sort_rank(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x = np.asarray(ops[0])
    moved = np.moveaxis(x, attrs["axis"], -1)
    width = moved.shape[-1]
    rows = moved.reshape(-1, width)
    ranks = np.empty(rows.shape, dtype=np.int64)
    step = max(1, ROWS_AT_ONCE // max(width, 1))
    for start in range(0, rows.shape[0], step):
        keys = sort_keys(rows[start : start + step], bool(attrs["descending"]))
        order = sort_order(keys)
        positions = np.broadcast_to(np.arange(width, dtype=np.int64), order.shape)
        np.put_along_axis(ranks[start : start + step], order, positions, axis=1)
    return np.ascontiguousarray(np.moveaxis(ranks.reshape(moved.shape), -1, attrs["axis"]))


@kernel("rank_mask")
def _rank_mask(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x = np.asarray(ops[0])
    keys = sort_keys(x.reshape(-1), bool(attrs["descending"]))
    begin, end = attrs["begin"], min(attrs["end"], keys.size)
    mask = leading(keys, end)
    if begin > 0:
        mask &= ~leading(keys, begin)
    return mask.reshape(x.shape)
