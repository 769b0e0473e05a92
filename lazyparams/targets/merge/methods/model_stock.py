"""`model_stock`: Model Stock. The base moves toward the models' average by
`t = k cos / (1 + (k - 1) cos)`, cos the mean cosine between the models' task vectors (of whole
tensors, or of each row with `filter_wise`), k the number of models; where the denominator
vanishes the base is kept. Computed in the merge's dtype, as mergekit does; whole-tensor norms
and dot products are summed rows first.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge
from lazyparams.targets.merge.steps import clamp, divide, dot, narrowed, norm, scale, widened

NORM_EPSILON = 1e-6
SINGULAR = 1e-6


def merge(inputs: TensorMerge) -> Tensor:
    """The base interpolated toward the models' average."""
    assert inputs.base is not None
    base, models = inputs.base, list(inputs.models)
    filter_wise = inputs.values["filter_wise"]
    if filter_wise and base.ndim == 1:
        base, models = base.reshape(1, -1), [m.reshape(1, -1) for m in models]
    cos = _mean_cosine([m - base for m in models], -1 if filter_wise else None)
    count = len(models)
    denominator = scale(cos, count - 1) + 1
    singular = ops.abs(denominator) < SINGULAR
    t = ops.where(singular, 0, scale(cos, count) / ops.where(singular, 1, denominator))
    average = models[0] + 0  # Python's sum() starts from 0
    for model in models[1:]:
        average = average + model
    average = divide(average, count)
    return (t * average + (1 - t) * base).reshape(inputs.base.shape)


def _mean_cosine(offsets: Sequence[Tensor], axis: int | None) -> Tensor:
    """The mean over pairs of the cosine between two task vectors (clamped to [-1, 1])."""
    cosines = []
    for index, a in enumerate(offsets):
        for b in offsets[index + 1 :]:
            lengths = ops.maximum(norm(a, axis) * norm(b, axis), NORM_EPSILON)
            cosines.append(clamp(dot(a, b, axis) / lengths, -1, 1))
    summed = widened(cosines[0])
    for cosine in cosines[1:]:
        summed = summed + widened(cosine)
    return narrowed(summed / len(cosines), cosines[0].dtype)


METHOD = MergeMethod(
    "model_stock",
    "the base moved toward the models' average by their task vectors' angle",
    merge,
    (Parameter("filter_wise", "flag", False, summary="one angle per row, not per tensor"),),
    base="required",
    min_inputs=3,
)
