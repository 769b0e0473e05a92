"""`passthrough`: tensors copied unchanged, from slices of layers (a frankenmerge).

With `slices`, each slice's layers are stacked after the previous slice's; a slice of one
source copies its layers. Without slices, one model is copied (a plain cast to the out dtype).
"""

from __future__ import annotations

from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge, number_in


def merge(inputs: TensorMerge) -> Tensor:
    """The one model's tensor, scaled by its `scale` when one is given."""
    tensor = inputs.models[0]
    scale = inputs.per_model["scale"][0]
    return tensor if scale == 1 else tensor * scale


METHOD = MergeMethod(
    "passthrough",
    "copy layers unchanged; with slices, stack layer ranges of several models",
    merge,
    (Parameter("scale", number_in(-1e6, 1e6), 1.0, per_model=True, summary="multiply by"),),
    base="none",
    max_models=1,
    layered=True,
)
