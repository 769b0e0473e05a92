"""`nuslerp`: spherical interpolation of two models by their weights, `t = w1 / (w0 + w1)`
(0.5 where the weights cancel), of their task vectors when a base is given.

With `nuslerp_flatten` (the default) each tensor is one vector; otherwise each row is one
(`nuslerp_row_wise`: each column of the first axis). Where two vectors are nearly parallel the
interpolation is linear. Computed in the merge's dtype, as mergekit does; a whole-tensor norm
or dot product is summed rows first.
"""

from __future__ import annotations

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge
from lazyparams.targets.merge.steps import clamp, dot, norm, scale, trig

UNIT_EPSILON = 1e-7
PARALLEL = 1e-8 * 1e-8
"""Vectors with 1 - cos^2 at most this are interpolated linearly."""


def merge(inputs: TensorMerge) -> Tensor:
    """The two models (or their task vectors) interpolated on the sphere by weight."""
    first, second = inputs.per_model["weight"]
    weights = first + second
    t = 0.5 if abs(weights) < 1e-6 else second / weights
    a, b = inputs.models
    flatten = inputs.values["nuslerp_flatten"]
    axis = None if flatten else 0 if inputs.values["nuslerp_row_wise"] else -1
    base = inputs.base
    if base is None:
        return interpolate(t, a, b, axis)
    return base + interpolate(t, a - base, b - base, axis)


def interpolate(t: float, v0: Tensor, v1: Tensor, axis: int | None) -> Tensor:
    """v0 and v1 interpolated at t on the sphere, as whole vectors (`axis` None) or along
    `axis`, in their dtype."""
    u0 = v0 / ops.maximum(norm(v0, axis), UNIT_EPSILON)
    u1 = v1 / ops.maximum(norm(v1, axis), UNIT_EPSILON)
    cos = clamp(dot(u0, u1, axis), -1, 1)
    parallel = (1 - cos * cos) <= PARALLEL
    theta = trig(ops.arccos, ops.where(parallel, 0, cos))
    sin_theta = trig(ops.sin, theta)
    arc = trig(ops.sin, scale(theta, 1 - t)) * v0 + trig(ops.sin, scale(theta, t)) * v1
    line = scale(v0, 1 - t) + scale(v1, t)
    return ops.where(parallel, line, arc / sin_theta)


METHOD = MergeMethod(
    "nuslerp",
    "spherical interpolation of two models by weight, of rows or whole tensors, of task vectors "
    "when a base is given",
    merge,
    (
        Parameter("weight", "number", scope="non_base", summary="the model's weight"),
        Parameter("nuslerp_row_wise", "flag", False, summary="interpolate columns, not rows"),
        Parameter("nuslerp_flatten", "flag", True, summary="interpolate whole tensors"),
    ),
    base="optional",
    min_others=2,
    max_others=2,
)
