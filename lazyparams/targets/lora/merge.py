"""The LoRA merge, traced: each base tensor plus its adapters' updates, as PEFT's
`merge_and_unload` computes them on a CPU, op for op and dtype for dtype.

PEFT 0.22's rules (`tuners/lora/layer.py`, `variants.py`, `dora.py`):
- the update is `scaling * (B @ A)`, transposed for fan_in_fan_out and embeddings, computed in
  the factors' dtype, or in float32 and cast back when they are float16/bfloat16;
- a linear weight takes the update in place: the add runs in the wider of the two dtypes and
  rounds once to the weight's; an embedding's update is cast to the weight's dtype first;
- DoRA: `W' = m / ||W0 + dW|| * (W + dW)`, the norm over the weight's input axis of the
  unmerged weight `W0` plus the update, in their common dtype, then cast to W's dtype.
Every binary op follows torch's type promotion and rounds as torch does on a CPU (computed
in float32, or float64, and rounded once to the result's dtype). The product `B @ A` is one
matmul whose result has the weight's shape. Imports the frontend and the binding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.targets.lora.binding import LoraBinding, LoraUpdate, MergedTensor

HALVES = ("float16", "bfloat16")
"""The dtypes PEFT widens to float32 for the product on a CPU."""


def merge_lora(binding: LoraBinding, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The merged model's tensors, by base name, traced from the source set's `params`."""
    return {tensor.name: merged_tensor(tensor, params) for tensor in binding.tensors}


def merged_tensor(tensor: MergedTensor, params: Mapping[str, Tensor]) -> Tensor:
    """One base tensor (or the copy that replaces it) with its updates applied in order."""
    start = _as(params[tensor.start], tensor.info.dtype)
    current = start
    for update in tensor.updates:
        delta = lora_delta(update, params)
        if update.magnitude is not None:
            current = _dora(current, start, delta, params[update.magnitude], update)
        elif update.embedding:
            current = _torch(ops.add, current, _as(delta, current.dtype))
        else:
            current = _as(_torch(ops.add, current, delta), current.dtype)
    return current


def lora_delta(update: LoraUpdate, params: Mapping[str, Tensor]) -> Tensor:
    """`scaling * B @ A` (transposed where the weight is), in PEFT's dtype: lora_B's for a
    linear layer, lora_embedding_A's for an embedding."""
    a, b = params[update.a], params[update.b]
    stored = a.dtype if update.embedding else b.dtype
    wide = "float32" if stored in HALVES else stored
    a, b = _as(a, wide), _as(b, wide)
    if update.transposed:  # (B @ A).T as one product of the weight's shape
        product = ops.matmul(ops.transpose(a), ops.transpose(b))
    else:
        product = ops.matmul(b, a)
    return _as(product * update.scaling, stored)


def _dora(
    current: Tensor, start: Tensor, delta: Tensor, magnitude: Tensor, update: LoraUpdate
) -> Tensor:
    """DoRA's merge (see the module docstring): the magnitude over the column norms of the
    unmerged weight plus the update, times the weight plus the update."""
    axis = update.norm_axis
    norm = _norm(_torch(ops.add, start, delta), axis)
    column = ops.reshape(magnitude, (-1, 1) if axis == 1 else (1, -1))
    factor = _torch(ops.divide, column, norm)
    return _as(_torch(ops.multiply, factor, _torch(ops.add, current, delta)), current.dtype)


def _norm(x: Tensor, axis: int) -> Tensor:
    """The 2-norms along `axis` (kept), accumulated in float32 (float64 for float64) and
    given in x's dtype, as torch.linalg.norm."""
    wide = _as(x, _wide(x.dtype))
    return _as(ops.sqrt(ops.sum(wide * wide, axis=axis, keepdims=True)), x.dtype)


def _torch(op: Callable[[Tensor, Tensor], Tensor], a: Tensor, b: Tensor) -> Tensor:
    """`op(a, b)` as torch computes it on a CPU: in the promoted dtype of a and b, each
    element computed in float32 (float64) and rounded once to it."""
    result = _promoted(a.dtype, b.dtype)
    wide = _wide(result)
    return _as(op(_as(a, wide), _as(b, wide)), result)


def _promoted(a: str, b: str) -> str:
    """torch's promotion of two float dtypes: float16 with bfloat16 gives float32."""
    if a == b:
        return a
    return "float64" if "float64" in (a, b) else "float32"


def _wide(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _as(x: Tensor, dtype: str) -> Tensor:
    return x if x.dtype == dtype else x.astype(dtype)
