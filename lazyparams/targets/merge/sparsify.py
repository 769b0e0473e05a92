"""How the task-vector methods thin each task vector before adding them (mergekit's
sparsification methods, as its documentation and papers define them).

- `magnitude` (TIES): keep the `density` share of the largest magnitudes, at least one.
- `outliers` (Model Breadcrumbs): drop the `gamma` share of the largest magnitudes and as many
  of the smallest as leaves the `density` share.
- `random` (DARE): keep each element with probability `density`.
- `della` (DELLA's MAGPRUNE): keep each element with a probability from `density - epsilon`
  to `density + epsilon`, by its magnitude's rank in its row.

Each may rescale the kept elements so that the vector's L1 norm stays what it was. Ranks order
equal magnitudes as torch's CPU sort does (`R.rank_mask`, `R.sort_rank`); the random masks come
from the merge's stream (`Draws`), in float32 uniforms compared with the keep probability. The
rank and random steps hold whole tensors. Imports the frontend and the merge's steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import Draws
from lazyparams.targets.merge.steps import clamp, narrowed, rounded, scale, sum_of

Sparsifier = Callable[[Tensor, Mapping[str, Any], bool, Draws | None], Tensor]
"""(task vector, the model's values, rescale, the merge's draws) -> the thinned vector."""
RESCALE_EPSILON = 1e-7
"""An L1 norm below this, before or after the mask, leaves the masked vector unscaled."""


def magnitude(
    delta: Tensor, values: Mapping[str, Any], rescale: bool, draws: Draws | None
) -> Tensor:
    """The `density` share of the largest magnitudes (at least one element), the rest zero."""
    density = values["density"]
    if density >= 1:
        return delta
    if density <= 0 or delta.size == 0:
        return ops.zeros_like(delta)
    kept = max(1, int(density * delta.size))
    mask = _rank_mask(ops.abs(delta), 0, kept, descending=True)
    return rescaled(delta, mask.astype(delta.dtype), rescale)


def outliers(
    delta: Tensor, values: Mapping[str, Any], rescale: bool, draws: Draws | None
) -> Tensor:
    """Magnitude ranks [n - kept - top, n - top) kept: the `gamma` share of the largest
    dropped, then the smallest, so that the `density` share remains (fewer outliers dropped
    where both cannot be)."""
    density = values["density"]
    if density >= 1:
        return delta
    size = delta.size
    kept, top = int(density * size), int(values["gamma"] * size)
    bottom = max(0, size - kept - top)
    begin, end, _ = slice(bottom, bottom + kept).indices(size)
    mask = _rank_mask(ops.abs(delta), begin, max(begin, end), descending=False)
    return rescaled(delta, mask.astype(delta.dtype), rescale)


def random(delta: Tensor, values: Mapping[str, Any], rescale: bool, draws: Draws | None) -> Tensor:
    """Each element kept with probability `density` (one draw per element, row-major)."""
    density = values["density"]
    if density >= 1:
        return delta
    assert draws is not None
    tensor = narrowed(delta, work_dtype(delta.dtype))
    keep = _drawn(draws, rounded(density, tensor.dtype), tensor)
    return narrowed(rescaled(tensor, keep, rescale), delta.dtype)


def della(delta: Tensor, values: Mapping[str, Any], rescale: bool, draws: Draws | None) -> Tensor:
    """Each element kept with probability `density - epsilon + 2 * epsilon * r`, r its
    magnitude's rank in its row (axis 1; a vector is one row) scaled to [0, 1]."""
    density, epsilon = values["density"], values["epsilon"]
    if density >= 1:
        return delta
    if density <= 0:
        return ops.zeros_like(delta)
    assert draws is not None
    work = work_dtype(delta.dtype)
    rows = delta if delta.ndim >= 2 else delta.reshape(1, -1)
    ranks = _sort_rank(ops.abs(rows), axis=1).astype(work) + 1
    low, high = ranks.min(axis=1, keepdims=True), ranks.max(axis=1, keepdims=True)
    spread = clamp((ranks - low) / (high - low), 0, 1)
    probabilities = scale(scale(spread, 2), epsilon) + (density - epsilon)
    tensor = narrowed(rows, work)
    thinned = rescaled(tensor, _drawn(draws, probabilities, tensor), rescale)
    return narrowed(thinned, delta.dtype).reshape(delta.shape)


def work_dtype(dtype: str) -> str:
    """The dtype the random methods draw and rescale in on a CPU: bfloat16 stays, the others
    are computed in float32 (torch has no CPU bernoulli for float16)."""
    return "bfloat16" if dtype == "bfloat16" else "float32"


def rescaled(tensor: Tensor, mask: Tensor, rescale: bool) -> Tensor:
    """`tensor * mask`, with `rescale` times the ratio of the L1 norms before and after (left
    unscaled where either norm is below RESCALE_EPSILON)."""
    masked = tensor * mask
    if not rescale:
        return masked
    before, after = sum_of(ops.abs(tensor)), sum_of(ops.abs(masked))
    small = (before < RESCALE_EPSILON) | (after < RESCALE_EPSILON)
    return masked * ops.where(small, 1, before / after)


def check_random(values: Mapping[str, Any]) -> str | None:
    """DARE keeps elements with probability `density`: below 0 there is none."""
    return "expected density >= 0 (a keep probability)" if values["density"] < 0 else None


def check_della(values: Mapping[str, Any]) -> str | None:
    """DELLA's probabilities range over density +- epsilon, which must stay inside (0, 1)."""
    density, epsilon = values["density"], values["epsilon"]
    if 0 < density < 1 and (density + epsilon >= 1 or density - epsilon <= 0):
        return "expected epsilon such that density - epsilon > 0 and density + epsilon < 1"
    return None


def _drawn(draws: Draws, probability: Tensor | float, like: Tensor) -> Tensor:
    """A mask of like's shape and dtype: 1 where the stream's next uniform is below the keep
    probability (compared in float32, as torch's `bernoulli` compares), else 0."""
    uniforms = draws.uniform(like.shape)
    bound = probability.astype("float32") if isinstance(probability, Tensor) else probability
    return (uniforms < bound).astype(like.dtype)


def _rank_mask(x: Tensor, begin: int, end: int, descending: bool) -> Tensor:
    attrs = {"begin": begin, "end": end, "descending": descending}
    return Tensor(x.tracer, x.tracer.emit_op("rank_mask", (x.var,), attrs, "rank_mask"))


def _sort_rank(x: Tensor, axis: int) -> Tensor:
    attrs = {"axis": axis, "descending": False}
    return Tensor(x.tracer, x.tracer.emit_op("sort_rank", (x.var,), attrs, "sort_rank"))
