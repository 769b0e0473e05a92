"""`passthrough`: tensors copied unchanged, from slices of layers (a frankenmerge).

With `slices`, each slice's layers are stacked after the previous slice's (one source each);
the tensors before the layers come from the first slice's source, those after from the last's.
Without slices, one model is copied. `scale`, where given, multiplies the tensor.
"""

from __future__ import annotations

from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.merge import MergeMethod, Parameter, TensorMerge
from lazyparams.targets.merge.steps import scale


def merge(inputs: TensorMerge) -> Tensor:
    """The one input's tensor, times its `scale` where one is given."""
    tensor = inputs.models[0]
    factor = inputs.per_model["scale"][0]
    return tensor if factor is None else scale(tensor, factor)


METHOD = MergeMethod(
    "passthrough",
    "copy layers unchanged; with slices, stack layer ranges of several models",
    merge,
    (Parameter("scale", "number", None, "input", "multiply the tensor by"),),
    max_inputs=1,
)
