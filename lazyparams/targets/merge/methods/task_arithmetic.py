"""`task_arithmetic`: the base plus the weighted sum of the models' task vectors.

A task vector is a model's difference from the base; `base + lambda * sum_i weight_i * d_i`,
the sum divided by `sum_i weight_i` when `normalize`.
"""

from __future__ import annotations

from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, TensorMerge
from lazyparams.targets.merge.steps import TASK_PARAMETERS, combine_task_vectors


def merge(inputs: TensorMerge) -> Tensor:
    """The base moved along the weighted task vectors."""
    assert inputs.base is not None
    deltas = [x - inputs.base for x in inputs.models]
    return combine_task_vectors(inputs, deltas, masks=None)


METHOD = MergeMethod(
    "task_arithmetic",
    "base + lambda * weighted sum of the task vectors (model - base)",
    merge,
    TASK_PARAMETERS,
    base="required",
)
