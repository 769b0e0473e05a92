"""`slerp`: spherical linear interpolation between the base and one other model, at `t`.

Both tensors are seen as single vectors; with theta the angle between them,
`sin((1 - t) theta) / sin(theta) * base + sin(t theta) / sin(theta) * other`, or the straight
line `(1 - t) * base + t * other` where they are nearly parallel (|cos theta| > 0.9995).
Computed in float32 (float64 for float64 models) and rounded to the merge's dtype, as
mergekit does; the norms and the dot product are whole-tensor sums, rows first.
"""

from __future__ import annotations

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge
from lazyparams.targets.merge.steps import clamp, dot, narrowed, norm, rounded, trig

PARALLEL = 0.9995
"""Above this |cos theta| the interpolation is linear."""
NORM_EPSILON = 1e-8


def merge(inputs: TensorMerge) -> Tensor:
    """The base and the other model interpolated on the sphere."""
    assert inputs.base is not None
    first = inputs.base
    wide = "float64" if first.dtype == "float64" else "float32"
    a, b = narrowed(first, wide), narrowed(inputs.models[0], wide)
    t = rounded(inputs.values["t"], wide)
    rest = rounded(1 - t, wide)  # exact in float64, rounded once as torch's `1 - t`
    cos = clamp(dot(a / _unit(norm(a)), b / _unit(norm(b))), -1, 1)
    linear = ops.abs(cos) > PARALLEL
    theta = trig(ops.arccos, ops.where(linear, 0, cos))
    sin_theta = trig(ops.sin, theta)
    coef_a = ops.where(linear, rest, trig(ops.sin, theta * rest) / sin_theta)
    coef_b = ops.where(linear, t, trig(ops.sin, theta * t) / sin_theta)
    return narrowed(a * coef_a + b * coef_b, first.dtype)


def _unit(length: Tensor) -> Tensor:
    """A norm, or 1 where it is ~0 (a zero vector stays zero)."""
    return ops.where(length > NORM_EPSILON, length, 1)


METHOD = MergeMethod(
    "slerp",
    "spherical interpolation between the base and one other model, at t",
    merge,
    (Parameter("t", "number", summary="0 gives the base, 1 the other model"),),
    base="required",
    min_inputs=2,
    max_inputs=2,
)
