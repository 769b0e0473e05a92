"""`linear`: the weighted average of the models' tensors (a model soup).

`sum_i weight_i * x_i`, divided by `sum_i weight_i` when `normalize` (the default).
"""

from __future__ import annotations

from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge, is_bool, number_in
from lazyparams.targets.merge.steps import weight_total, weighted_sum


def merge(inputs: TensorMerge) -> Tensor:
    """The weighted average of `inputs.models`."""
    weights = inputs.per_model["weight"]
    total = weighted_sum(inputs.models, weights)
    if inputs.values["normalize"]:
        total = total / weight_total(weights, total.dtype)
    return total


METHOD = MergeMethod(
    "linear",
    "weighted average of the models (normalized by the weights' sum unless normalize: false)",
    merge,
    (
        Parameter("weight", number_in(-1e6, 1e6), per_model=True, summary="the model's weight"),
        Parameter("normalize", is_bool, True, summary="divide by the sum of the weights"),
    ),
    base="none",
)
