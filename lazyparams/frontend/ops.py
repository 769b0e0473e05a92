"""`lazyparams.ops`: numpy-style functions over traced tensors, each binding operator calls.

Axes may be negative and are resolved against the static rank here, so the IR holds plain
non-negative axes. Results that are views in numpy (an identity transpose, a reshape to the
same shape) return the operand itself. The elementwise math, comparisons, `where` and the
reductions are `math_ops`', re-exported here. Imports `ir` and the frontend's own modules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lazyparams.frontend import math_ops
from lazyparams.frontend.axes import axis_index as _axis
from lazyparams.frontend.axes import int_values as _ints
from lazyparams.frontend.kernels import call_tir, numpy_kernel
from lazyparams.frontend.location import trace_error
from lazyparams.frontend.math_ops import *  # noqa: F403  (the math: abs, where, sum, ...)
from lazyparams.frontend.tensor import (
    Tensor,
    binary,
    checked_dtype,
    constant_expr,
    operand,
    tensor_operand,
)
from lazyparams.frontend.tracer import Tracer, active_tracer
from lazyparams.ir.dtype import is_block, is_float, is_integer, to_numpy
from lazyparams.ir.expr import Tuple
from lazyparams.op.gguf import DEQUANTIZED_DTYPES

# Layout ----------------------------------------------------------------------------------------


def transpose(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """numpy.transpose: reverse the axes, or permute them as `axes` says."""
    x = tensor_operand(x, "transpose")
    if axes is None:
        perm = tuple(reversed(range(x.ndim)))
    else:
        perm = tuple(_axis(a, x.ndim, "transpose") for a in _ints(axes, "transpose", "axes"))
    if sorted(perm) != list(range(x.ndim)):
        raise trace_error(
            "transpose", f"expected a permutation of the {x.ndim} axes, got {tuple(axes or ())}"
        )
    if perm == tuple(range(x.ndim)):
        return x
    return Tensor(x.tracer, x.tracer.emit_op("permute_dims", (x.var,), {"axes": perm}, "transpose"))


permute_dims = transpose


def reshape(x: Tensor, shape: int | Sequence[int]) -> Tensor:
    """numpy.reshape with at most one -1, resolved here so the IR shape is fully static."""
    x = tensor_operand(x, "reshape")
    dims = _resolve_shape(_ints(shape, "reshape", "a shape"), x.size, "reshape")
    if dims == x.shape:
        return x
    return Tensor(x.tracer, x.tracer.emit_op("reshape", (x.var,), {"shape": dims}, "reshape"))


def _resolve_shape(dims: tuple[int, ...], size: int, what: str) -> tuple[int, ...]:
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in dims):
        raise trace_error(what, f"expected non-negative dims and at most one -1, got {dims}")
    known = math.prod(d for d in dims if d != -1)
    if unknown and known and size % known == 0:
        at = unknown[0]
        dims = (*dims[:at], size // known, *dims[at + 1 :])
    if math.prod(dims) != size or -1 in dims:
        raise trace_error(what, f"expected a shape of {size} elements, got {dims}")
    return dims


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """numpy.squeeze: drop the given axes (or every axis) of size 1."""
    x = tensor_operand(x, "squeeze")
    if axis is None:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        drop = {_axis(a, x.ndim, "squeeze") for a in _ints(axis, "squeeze", "axes")}
    wrong = [a for a in sorted(drop) if x.shape[a] != 1]
    if wrong:
        raise trace_error(
            "squeeze", f"expected axes of size 1, got axis {wrong[0]} of size {x.shape[wrong[0]]}"
        )
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))


def expand_dims(x: Tensor, axis: int | Sequence[int]) -> Tensor:
    """numpy.expand_dims: insert axes of size 1 at the given positions of the result."""
    x = tensor_operand(x, "expand_dims")
    if type(axis) is int:  # one axis, as `stack` inserts it: the common case, kept short
        at = _axis(axis, x.ndim + 1, "expand_dims")
        var = x.tracer.emit_op("expand_dims", (x.var,), {"axis": at}, "expand_dims")
        return Tensor(x.tracer, var)
    axes = _ints(axis, "expand_dims", "axes")
    ndim = x.ndim + len(axes)
    positions = sorted(_axis(a, ndim, "expand_dims") for a in axes)
    if len(set(positions)) != len(positions):
        raise trace_error("expand_dims", f"expected distinct axes, got {axes}")
    for at in positions:
        var = x.tracer.emit_op("expand_dims", (x.var,), {"axis": at}, "expand_dims")
        x = Tensor(x.tracer, var)
    return x


def concat(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """numpy.concatenate of tensors (numpy arrays among them become constants)."""
    tracer, first = _first_tensor(tensors, "concat")
    fields = tuple(operand(tracer, t, first.dtype, "concat") for t in tensors)
    if len(fields) == 1:
        return first
    at = _axis(axis, first.ndim, "concat")
    var = tracer.emit_op("concat", (Tuple(fields),), {"axis": at}, "concat")
    return Tensor(tracer, var)


concatenate = concat


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """numpy.stack: join tensors of one shape along a new axis."""
    import numpy as np

    tracer, first = _first_tensor(tensors, "stack")
    shapes = {np.shape(t) if not isinstance(t, Tensor) else t.shape for t in tensors}
    if len(shapes) != 1:
        raise trace_error("stack", f"expected tensors of one shape, got {sorted(shapes)}")
    at = _axis(axis, first.ndim + 1, "stack")
    members = [tensor_operand(_as_tensor(tracer, t), "expand_dims").var for t in tensors]
    expanded = tracer.emit_op_each("expand_dims", members, {"axis": at}, "expand_dims")
    return concat([Tensor(tracer, var) for var in expanded], axis=at)


def split(x: Tensor, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """numpy.split: equal sections (which must divide the axis) or split indices."""
    x = tensor_operand(x, "split")
    at = _axis(axis, x.ndim, "split")
    dim = x.shape[at]
    sections: int | tuple[int, ...]
    if isinstance(indices_or_sections, int) or is_integer(indices_or_sections):
        count = int(indices_or_sections)  # type: ignore[arg-type]
        if count <= 0 or dim % count:
            raise trace_error(
                "split", f"expected sections dividing axis {at} of size {dim}, got {count}"
            )
        sections = count
    else:
        sections = _split_indices(indices_or_sections, dim)
    attrs = {"indices_or_sections": sections, "axis": at}
    var = x.tracer.emit_op("split", (x.var,), attrs, "split")
    return [Tensor(x.tracer, v) for v in x.tracer.emit_fields(var, "split")]


def _split_indices(indices: Sequence[int], dim: int) -> tuple[int, ...]:
    raw = _ints(indices, "split", "split indices")
    resolved = tuple(i + dim if i < 0 else i for i in raw)
    if any(not 0 <= i <= dim for i in resolved) or list(resolved) != sorted(resolved):
        raise trace_error(
            "split", f"expected increasing split indices in [0, {dim}], got {tuple(raw)}"
        )
    return resolved


def take(x: Tensor, indices: Any, axis: int | None = None) -> Tensor:
    """numpy.take: gather along `axis` (the flattened tensor when None) by int indices."""
    import numpy as np

    x = tensor_operand(x, "take")
    if axis is None:
        x, axis = reshape(x, (x.size,)), 0
    at = _axis(axis, x.ndim, "take")
    if isinstance(indices, Tensor):
        return x[(slice(None),) * at + (indices,)]
    return x[(slice(None),) * at + (np.asarray(indices),)]


def take_along_axis(x: Tensor, indices: Any, axis: int) -> Tensor:
    """numpy.take_along_axis: gather along `axis` by int indices of x's rank (a tensor or a
    constant array), which broadcast against x along the other axes."""
    x = tensor_operand(x, "take_along_axis")
    at = _axis(axis, x.ndim, "take_along_axis")
    index = (
        indices.var if isinstance(indices, Tensor) else constant_expr(indices, "take_along_axis")
    )
    var = x.tracer.emit_op("take_along_axis", (x.var, index), {"axis": at}, "take_along_axis")
    return Tensor(x.tracer, var)


def unpack_bits(x: Tensor, bits: int, axis: int = -1, dtype: str = "int8") -> Tensor:
    """The `bits`-bit fields of each int32 of x along `axis`, lowest bits first, as unsigned
    values in `dtype` (the axis grows by 32 / bits): how GPTQ and compressed-tensors pack
    weights and zero points."""
    x = tensor_operand(x, "unpack_bits")
    at = _axis(axis, x.ndim, "unpack_bits")
    attrs = {"bits": bits, "axis": at, "dtype": dtype}
    return Tensor(x.tracer, x.tracer.emit_op("unpack_bits", (x.var,), attrs, "unpack_bits"))


# Element types and arithmetic --------------------------------------------------------------------


def cast(x: Tensor, dtype: object) -> Tensor:
    """numpy's `astype`; casting to the same dtype returns the operand. To or from a GGML block
    type it quantizes or dequantizes (through float32 where neither side is a float)."""
    x = tensor_operand(x, "astype")
    name = checked_dtype(dtype, "astype")
    if name == x.dtype:
        return x
    if is_block(x.dtype):
        wide = name if name in DEQUANTIZED_DTYPES else "float32"
        return cast(dequantize_gguf(x, wide), name)
    if is_block(name):
        return quantize_gguf(x if is_float(x.dtype) else cast(x, "float32"), name)
    return Tensor(x.tracer, x.tracer.emit_op("astype", (x.var,), {"dtype": name}, "astype"))


astype = cast


def add(a: Any, b: Any) -> Tensor:
    """numpy.add of tensors, numpy arrays and scalars (scalars take the tensor's dtype)."""
    return binary("+", a, b)


def subtract(a: Any, b: Any) -> Tensor:
    """numpy.subtract, as `add`."""
    return binary("-", a, b)


def multiply(a: Any, b: Any) -> Tensor:
    """numpy.multiply, as `add`."""
    return binary("*", a, b)


def divide(a: Any, b: Any) -> Tensor:
    """numpy.divide of float tensors, as `add`."""
    return binary("/", a, b)


def negative(x: Tensor) -> Tensor:
    """numpy.negative."""
    return -tensor_operand(x, "negative")


def matmul(a: Any, b: Any, out_dtype: object = None) -> Tensor:
    """numpy.matmul; with `out_dtype` the operands are cast to it first, as numpy's `dtype=`."""
    tracer, like = _first_tensor((a, b), "matmul")
    args = (operand(tracer, a, like.dtype, "matmul"), operand(tracer, b, like.dtype, "matmul"))
    target = None if out_dtype is None else checked_dtype(out_dtype, "matmul")
    var = tracer.emit_op("matmul", args, {"out_dtype": target}, "matmul")
    return Tensor(tracer, var)


# Quantization -----------------------------------------------------------------------------------


def quantize_int8(x: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
    """Symmetric per-channel int8: (int8 values, float32 scales of shape (x.shape[axis],))."""
    x = tensor_operand(x, "quantize_int8")
    at = _axis(axis, x.ndim, "quantize_int8")
    var = x.tracer.emit_op("quantize_int8", (x.var,), {"axis": at}, "quantize_int8")
    q, scale = x.tracer.emit_fields(var, "quantize_int8")
    return Tensor(x.tracer, q), Tensor(x.tracer, scale)


def quantize_int4(x: Tensor, group_size: int = 32) -> tuple[Tensor, Tensor]:
    """Grouped int4 of a 2-D (N, K) tensor: (uint8 (N, K//2) packed, float32 (N, K//group))."""
    x = tensor_operand(x, "quantize_int4")
    attrs = {"group_size": _ints(group_size, "quantize_int4", "group_size")[0]}
    var = x.tracer.emit_op("quantize_int4", (x.var,), attrs, "quantize_int4")
    packed, scale = x.tracer.emit_fields(var, "quantize_int4")
    return Tensor(x.tracer, packed), Tensor(x.tracer, scale)


def dequantize_int8(q: Tensor, scale: Tensor, axis: int = 0) -> Tensor:
    """The float32 tensor `quantize_int8` encoded."""
    q = tensor_operand(q, "dequantize_int8")
    at = _axis(axis, q.ndim, "dequantize_int8")
    args = (q.var, tensor_operand(scale, "dequantize_int8").var)
    var = q.tracer.emit_op("dequantize_int8", args, {"axis": at}, "dequantize_int8")
    return Tensor(q.tracer, var)


def quantize_gguf(x: Tensor, type: str) -> Tensor:
    """x's rows in GGML blocks of `type` ("q8_0", "q4_0", ...), bit for bit as ggml's reference
    quantizer: the same shape, of the block dtype `type`."""
    x = tensor_operand(x, "quantize_gguf")
    var = x.tracer.emit_op("quantize_gguf", (x.var,), {"type": type}, "quantize_gguf")
    return Tensor(x.tracer, var)


def dequantize_gguf(q: Tensor, dtype: object = "float32") -> Tensor:
    """The floats (float32, float16 or bfloat16) a tensor of a GGML block type stands for."""
    q = tensor_operand(q, "dequantize_gguf")
    attrs = {"type": q.dtype, "dtype": checked_dtype(dtype, "dequantize_gguf")}
    return Tensor(q.tracer, q.tracer.emit_op("dequantize_gguf", (q.var,), attrs, "dequantize_gguf"))


def dequantize_int4(packed: Tensor, scale: Tensor, group_size: int = 32) -> Tensor:
    """The float32 tensor `quantize_int4` encoded."""
    packed = tensor_operand(packed, "dequantize_int4")
    args = (packed.var, tensor_operand(scale, "dequantize_int4").var)
    attrs = {"group_size": _ints(group_size, "dequantize_int4", "group_size")[0]}
    var = packed.tracer.emit_op("dequantize_int4", args, attrs, "dequantize_int4")
    return Tensor(packed.tracer, var)


# Creation ---------------------------------------------------------------------------------------


def zeros(shape: int | Sequence[int], dtype: object = "float64") -> Tensor:
    """numpy.zeros (float64 by default, as in numpy)."""
    return _filled("zeros", shape, dtype)


def ones(shape: int | Sequence[int], dtype: object = "float64") -> Tensor:
    """numpy.ones (float64 by default, as in numpy)."""
    return _filled("ones", shape, dtype)


def zeros_like(x: Tensor, dtype: object = None) -> Tensor:
    """numpy.zeros_like."""
    x = tensor_operand(x, "zeros_like")
    return _filled("zeros", x.shape, x.dtype if dtype is None else dtype)


def ones_like(x: Tensor, dtype: object = None) -> Tensor:
    """numpy.ones_like."""
    x = tensor_operand(x, "ones_like")
    return _filled("ones", x.shape, x.dtype if dtype is None else dtype)


def _filled(op: str, shape: int | Sequence[int], dtype: object) -> Tensor:
    tracer = active_tracer(op)
    dims = _ints(shape, op, "a shape")
    if any(d < 0 for d in dims):
        raise trace_error(op, f"expected non-negative dims, got {dims}")
    attrs = {"shape": dims, "dtype": checked_dtype(dtype, op)}
    return Tensor(tracer, tracer.emit_op(op, (), attrs, op))


def constant(value: Any, dtype: object = None) -> Tensor:
    """A numpy array (or nested lists with a dtype) as a tensor bound once in the function."""
    import numpy as np

    tracer = active_tracer("constant")
    np_dtype = None if dtype is None else to_numpy(checked_dtype(dtype, "constant"))
    expr = constant_expr(np.asarray(value, dtype=np_dtype), "constant")
    return Tensor(tracer, tracer.emit(expr, "const", "constant"))


# Helpers ----------------------------------------------------------------------------------------


def _first_tensor(values: Sequence[Any], what: str) -> tuple[Tracer, Tensor]:
    if not isinstance(values, (list, tuple)) or not values:
        raise trace_error(what, f"expected a non-empty list of tensors, got {values!r}")
    first = next((v for v in values if isinstance(v, Tensor)), None)
    first = tensor_operand(first, what)
    return first.tracer, first


def _as_tensor(tracer: Tracer, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    return Tensor(tracer, tracer.emit(constant_expr(value, "stack"), "const", "stack"))


__all__ = [
    "add",
    "astype",
    "call_tir",
    "cast",
    "concat",
    "concatenate",
    "constant",
    "dequantize_gguf",
    "dequantize_int4",
    "dequantize_int8",
    "divide",
    "expand_dims",
    "matmul",
    "multiply",
    "negative",
    "numpy_kernel",
    "ones",
    "ones_like",
    "permute_dims",
    "quantize_gguf",
    "quantize_int4",
    "quantize_int8",
    "reshape",
    "split",
    "squeeze",
    "stack",
    "subtract",
    "take",
    "take_along_axis",
    "transpose",
    "unpack_bits",
    "zeros",
    "zeros_like",
]
__all__ += math_ops.__all__
