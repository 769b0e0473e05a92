"""Steps several merge methods share: weighted sums, and the combination of task vectors.

The task-vector family (task arithmetic, TIES, DARE, breadcrumbs, DELLA) differs only in how
each model's task vector is sparsified and whether signs must agree; `combine_task_vectors`
is the common tail. Imports the frontend and the registry's types.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import Parameter, TensorMerge, is_bool, number_in

WEIGHT = Parameter("weight", number_in(-1e6, 1e6), per_model=True, summary="the model's weight")
LAMBDA = Parameter("lambda", number_in(-1e6, 1e6), 1.0, summary="scale of the merged vector")
TASK_PARAMETERS = (
    WEIGHT,
    Parameter("normalize", is_bool, False, summary="divide by the sum of the weights"),
    LAMBDA,
)
DIVISOR_EPSILON = 1e-8
"""A sum of weights smaller than this in magnitude divides as 1 (no division by ~0)."""


def weighted_sum(tensors: Sequence[Tensor], weights: Sequence[float]) -> Tensor:
    """`sum_i weights[i] * tensors[i]`, added in order, in the tensors' dtype."""
    total = tensors[0] * weights[0]
    for tensor, weight in zip(tensors[1:], weights[1:], strict=True):
        total = total + tensor * weight
    return total


def weight_total(weights: Sequence[float], dtype: str) -> float:
    """The sum of `weights` as the tensors' dtype adds them, back as a Python float."""
    from lazyparams.io.dtypes import numpy_dtype

    kind = numpy_dtype(dtype)
    total = np.asarray(weights[0], dtype=kind)
    for weight in weights[1:]:
        total = (total + np.asarray(weight, dtype=kind)).astype(kind)
    return float(total)


def combine_task_vectors(
    inputs: TensorMerge, deltas: Sequence[Tensor], masks: Sequence[Tensor] | None
) -> Tensor:
    """`base + lambda * sum_i w_i * delta_i (* mask_i)`, the sum divided by `sum_i w_i
    (* mask_i)` when `normalize` (where that divisor is ~0, by 1)."""
    assert inputs.base is not None
    weights = inputs.per_model["weight"]
    weighted = [d * w for d, w in zip(deltas, weights, strict=True)]
    if masks is not None:
        weighted = [d * m.astype(d.dtype) for d, m in zip(weighted, masks, strict=True)]
    mixed = _add_all(weighted)
    if inputs.values["normalize"]:
        mixed = mixed / _divisor(weights, masks, mixed)
    scale = inputs.values["lambda"]
    if scale != 1:
        mixed = mixed * scale
    return inputs.base + mixed


def _add_all(tensors: Sequence[Tensor]) -> Tensor:
    total = tensors[0]
    for tensor in tensors[1:]:
        total = total + tensor
    return total


def _divisor(
    weights: Sequence[float], masks: Sequence[Tensor] | None, like: Tensor
) -> Tensor | float:
    if masks is None:
        total = weight_total(weights, like.dtype)
        return 1.0 if abs(total) < DIVISOR_EPSILON else total
    divisor = _add_all([m.astype(like.dtype) * w for m, w in zip(masks, weights, strict=True)])
    small = ops.less(ops.abs(divisor), DIVISOR_EPSILON)
    return ops.where(small, ops.ones_like(divisor), divisor)
