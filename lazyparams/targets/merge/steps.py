"""Steps several merge methods share, computed as mergekit's torch code computes them, so that
the merged bytes match its.

torch computes the half types (bfloat16, float16) element by element in float32 and rounds
each result once; so do lazyparams' kernels. What differs is a Python number next to a tensor:
torch multiplies and divides by one in float32 (`scale`, `divide`) but rounds it to the
tensor's dtype before adding it (the frontend's `x + number` does that). A sum over the models
(`add_all`, torch's sum over a stacked axis) and over a whole tensor (`total`) accumulates in
float32 for the half types and rounds once. `total` adds rows first (each row, then the vector
of row sums), so that the compiler can run it block by block with the same bytes; its order is
not torch's, so a whole-tensor sum may differ from torch's in its last bits. Imports the
frontend and the io layer's dtypes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.dtypes import numpy_dtype

HALVES = ("bfloat16", "float16")
DIVISOR_EPSILON = 1e-8
"""A sum of weights smaller than this in magnitude divides as 1 (no division by ~0)."""


def accumulator(dtype: str) -> str:
    """The dtype torch computes a dtype's sums and scalar products in."""
    return "float32" if dtype in HALVES else dtype


def widened(x: Tensor) -> Tensor:
    """x in its accumulator dtype (x itself where that is its own)."""
    wide = accumulator(x.dtype)
    return x if x.dtype == wide else x.astype(wide)


def narrowed(x: Tensor, dtype: str) -> Tensor:
    """x rounded to `dtype` (x itself where it is of that dtype)."""
    return x if x.dtype == dtype else x.astype(dtype)


def scale(x: Tensor, factor: float) -> Tensor:
    """`x * factor` for a Python number, as torch multiplies: in the accumulator dtype."""
    return narrowed(widened(x) * factor, x.dtype)


def divide(x: Tensor, divisor: float) -> Tensor:
    """`x / divisor` for a Python number, as torch divides: in the accumulator dtype."""
    return narrowed(widened(x) / divisor, x.dtype)


def add_all(tensors: Sequence[Tensor]) -> Tensor:
    """`sum_i tensors[i]`, added in order in the accumulator dtype and rounded once."""
    total = widened(tensors[0])
    for tensor in tensors[1:]:
        total = total + widened(tensor)
    return narrowed(total, tensors[0].dtype)


def total(x: Tensor) -> Tensor:
    """The sum of every element of x in its accumulator dtype, rows first: for a tensor of two
    or more axes each row (axes 1..) is summed, then the vector of row sums (a 0-d tensor)."""
    wide = widened(x)
    if wide.ndim >= 2:
        wide = wide.sum(axis=tuple(range(1, wide.ndim)))
    return wide.sum()


def sum_of(x: Tensor) -> Tensor:
    """`x.sum()` as torch gives it: `total(x)` rounded to x's dtype."""
    return narrowed(total(x), x.dtype)


def norm(x: Tensor, axis: int | None = None) -> Tensor:
    """The 2-norm of x (of its whole, or along `axis`, kept), as `torch.norm`: the squares and
    their sum in the accumulator dtype, the root rounded to x's dtype."""
    wide = widened(x)
    squares = wide * wide
    summed = total(squares) if axis is None else squares.sum(axis=axis, keepdims=True)
    return narrowed(ops.sqrt(summed), x.dtype)


def dot(a: Tensor, b: Tensor, axis: int | None = None) -> Tensor:
    """`(a * b).sum()` (or along `axis`, kept): the products in a's dtype, their sum in the
    accumulator, rounded to a's dtype."""
    product = a * b
    if axis is None:
        return sum_of(product)
    return narrowed(widened(product).sum(axis=axis, keepdims=True), a.dtype)


def clamp(x: Tensor, low: float, high: float) -> Tensor:
    """x limited to [low, high] (NaN stays NaN)."""
    return ops.minimum(ops.maximum(x, low), high)


def rounded(value: float, dtype: str) -> float:
    """A Python number as a tensor of `dtype` holds it."""
    return float(np.asarray(value, dtype=numpy_dtype(dtype)))


def weight_total(weights: Sequence[float], dtype: str) -> float:
    """The sum of `weights` as torch sums a tensor of them in `dtype`: each rounded to dtype,
    added in the accumulator dtype, rounded back; ~0 (below 1e-8) becomes 1."""
    wide = numpy_dtype(accumulator(dtype))
    summed = np.asarray(0, dtype=wide)
    for weight in weights:
        summed = (summed + np.asarray(rounded(weight, dtype), dtype=wide)).astype(wide)
    result = rounded(float(summed), dtype)
    return 1.0 if abs(result) < rounded(DIVISOR_EPSILON, dtype) else result


def trig(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """`fn(x)` (`ops.arccos`, `ops.sin`) rounded to x's dtype from float64, through float32
    for the half types as torch's float32 routines round (torch's own are within an ulp of
    this, not always equal)."""
    value = fn(x if x.dtype == "float64" else x.astype("float64"))
    return narrowed(narrowed(value, "float32") if x.dtype != "float64" else value, x.dtype)
