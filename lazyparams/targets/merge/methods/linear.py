"""`linear`: the weighted average of the models' tensors (a model soup).

`sum_i weight_i * x_i`, divided by `sum_i weight_i` when `normalize` (the default), computed in
float32 (float64 for float64 models) as mergekit does: each product added with one rounding (a
fused multiply-add, here the exact product added in float64 and rounded to float32), then cast
back to the merge's dtype. A base_model is merged as one more model, with its own weight.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge
from lazyparams.targets.merge.steps import narrowed, rounded


def merge(inputs: TensorMerge) -> Tensor:
    """The weighted average of `inputs.models`."""
    weights = inputs.per_model["weight"]
    first = inputs.models[0]
    wide = "float64" if first.dtype == "float64" else "float32"
    total: Tensor | None = None
    for model, weight in zip(inputs.models, weights, strict=True):
        total = _multiply_add(total, model, rounded(weight, wide), wide)
    assert total is not None
    if inputs.values["normalize"]:
        total = total / _weight_sum(weights, wide)
    return narrowed(total, first.dtype)


def _multiply_add(total: Tensor | None, x: Tensor, weight: float, wide: str) -> Tensor:
    """`total + x * weight` rounded once to `wide`: for float32 the product is exact in
    float64, so the float64 sum rounded to float32 is the fused multiply-add's result (but for
    a rare double rounding); float64 rounds twice."""
    if wide == "float64":
        product = narrowed(x, wide) * weight
        return product if total is None else total + product
    product = x.astype("float64") * weight
    summed = product if total is None else total.astype("float64") + product
    return summed.astype(wide)


def _weight_sum(weights: Sequence[float], wide: str) -> float:
    kind = np.float64 if wide == "float64" else np.float32
    summed = kind(0)
    for weight in weights:
        summed = kind(summed + kind(weight))
    return float(summed)


METHOD = MergeMethod(
    "linear",
    "weighted average of the models (normalized by the weights' sum unless normalize: false)",
    merge,
    (
        Parameter("weight", "number", scope="input", summary="the model's weight"),
        Parameter("normalize", "flag", True, summary="divide by the sum of the weights"),
    ),
)
