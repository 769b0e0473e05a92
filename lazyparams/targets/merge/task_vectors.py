"""The task-vector family (task arithmetic, TIES, DARE, Model Breadcrumbs, DELLA): one method
maker, as mergekit's generalized task arithmetic defines them.

Each model's task vector (model - base) is thinned (`sparsify`), weighted, and added; with sign
election (`consensus`) an element of a vector counts only where its sign agrees with that of
the weighted vectors' sum (ties to +). With `normalize` the sum is divided by the sum of the
weights that counted; it is scaled by `lambda` and added to the base. Everything is computed in
the merge's dtype, as mergekit computes it. The methods differ in their sparsification, sign
election and the defaults of `normalize` and `rescale`. Imports the frontend, the registry's
types, the merge's steps and the sparsifications.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, ModelCheck, Parameter, TensorMerge
from lazyparams.targets.merge.sparsify import Sparsifier
from lazyparams.targets.merge.steps import add_all, scale, weight_total

GAMMA = Parameter("gamma", "number", 0.01, "non_base", "share of the largest magnitudes dropped")
EPSILON = Parameter("epsilon", "number", 0.15, "non_base", "half the spread of keep probabilities")


def task_vector_method(
    name: str,
    summary: str,
    sparsify: Sparsifier | None = None,
    consensus: bool = False,
    normalize: bool = False,
    rescale: bool = False,
    extra: tuple[Parameter, ...] = (),
    check_model: ModelCheck | None = None,
) -> MergeMethod:
    """A task-vector method: its parameters (int8_mask, normalize, rescale, lambda, weight,
    density, then `extra`) with these defaults, and its merge."""

    def merge(inputs: TensorMerge) -> Tensor:
        return _merge(inputs, sparsify, consensus)

    parameters = (
        Parameter("int8_mask", "flag", False, summary="keep sign masks as int8 (no effect here)"),
        Parameter("normalize", "flag", normalize, summary="divide by the weights that counted"),
        Parameter("rescale", "flag", rescale, summary="keep each vector's L1 norm when thinned"),
        Parameter("lambda", "number", 1.0, summary="scale of the merged task vector"),
        Parameter("weight", "number", scope="non_base", summary="the model's weight"),
        Parameter("density", "number", 1.0, "non_base", "share of the task vector kept"),
        *extra,
    )
    return MergeMethod(name, summary, merge, parameters, base="required", check_model=check_model)


def _merge(inputs: TensorMerge, sparsify: Sparsifier | None, consensus: bool) -> Tensor:
    base = inputs.base
    assert base is not None
    if not inputs.models:
        return base
    weights = inputs.per_model["weight"]
    deltas = []
    for index, model in enumerate(inputs.models):
        delta = model - base
        if sparsify is not None:
            values = {name: given[index] for name, given in inputs.per_model.items()}
            delta = sparsify(delta, values, inputs.values["rescale"], inputs.draws)
        deltas.append(delta * weights[index])
    if consensus:
        mixed, divisor = _elected(deltas, weights)
    else:
        mixed, divisor = add_all(deltas), weight_total(weights, base.dtype)
    if inputs.values["normalize"]:
        mixed = mixed / divisor
    if inputs.values["lambda"] != 1:
        mixed = scale(mixed, inputs.values["lambda"])
    return base + mixed


def _elected(deltas: Sequence[Tensor], weights: Sequence[float]) -> tuple[Tensor, Any]:
    """The sum of the elements whose sign agrees with the sum's (0 counts as +), and the sum
    of the weights that counted at each element (1 where none did)."""
    positive = add_all(deltas) >= 0
    masks = [ops.where(positive, d > 0, d < 0).astype(d.dtype) for d in deltas]
    mixed = add_all([d * m for d, m in zip(deltas, masks, strict=True)])
    divisor = add_all([m * w for m, w in zip(masks, weights, strict=True)])
    return mixed, ops.where(ops.equal(divisor, 0), 1, divisor)
