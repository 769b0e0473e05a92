"""Split axes of the steps of a row-separable chain (see `chunk_chains`): where a step's
result splits, given where its operands split, or None when it mixes the split axis.

Imports `ir` and `analysis` only.
"""

from __future__ import annotations

from lazyparams.analysis.memory_model import tensor_nbytes
from lazyparams.ir import (
    Call,
    Constant,
    Op,
    StructInfo,
    TensorStructInfo,
    TupleGetItem,
    TupleStructInfo,
    Var,
    struct_info_of,
)

Split = int | tuple["Split", ...]
"""The split axis of a value: an axis for a tensor, one split per field for a tuple."""

ELEMENTWISE = frozenset(
    {"add", "subtract", "multiply", "divide", "maximum", "minimum", "where"}
    | {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"}
    | {"logical_and", "logical_or"}
)
"""Element-wise ops of several operands (numpy broadcasting)."""
GATHERS = frozenset({"take_along_axis"})
"""Gathers by constant indices (see `gather_split`)."""
UNARY = frozenset(
    {"astype", "abs", "sign", "sqrt", "sin", "cos", "acos", "exp", "log", "negative", "square"}
)
"""Element-wise ops of one operand: the result splits as the operand."""
REDUCTIONS = frozenset({"sum", "max", "min", "mean"})
"""Reductions: a step when the split axis is not reduced (rows reduced one by one)."""
BLOCK_STEPS = frozenset({"quantize_gguf", "dequantize_gguf"})
"""GGML block (de)quantization: rows are independent, but a row's values share blocks."""
UNPACKS = frozenset({"unpack_bits"})
"""Bit-field unpacking: the unpacked axis grows, every other one splits as the operand."""
SLICES = frozenset({"strided_slice"})
"""Slices: a step when they leave the split axis whole (the gate and up halves of each
expert of a fused expert tensor, split by experts)."""


def step_split(value: object, splits: dict[Var, Split], length: int) -> Split | None:
    """The split axis of a step's result, from those of its operands (None: not separable)."""
    if isinstance(value, Var):
        return splits.get(value)
    if isinstance(value, TupleGetItem):
        parent = splits.get(value.tuple_value)  # type: ignore[call-overload]
        return parent[value.index] if isinstance(parent, tuple) else None
    assert isinstance(value, Call) and isinstance(value.op, Op)
    name, x = value.op.name, value.args[0]
    split = splits.get(x) if isinstance(x, Var) else None
    if name in ELEMENTWISE:
        return elementwise_split(value, splits, length)
    if name in GATHERS:
        return gather_split(value, splits, length)
    if not isinstance(split, int):
        return None
    if name in UNARY:
        return split
    if name in REDUCTIONS:
        return _reduced_split(value, split)
    if name == "matmul":  # rows of x1 times the whole x2 are rows of the product
        whole = value.args[1]
        rows_only = split == 0 and _ndim(x) == 2 and _ndim(whole) == 2
        return 0 if rows_only and not (isinstance(whole, Var) and whole in splits) else None
    if name in BLOCK_STEPS:
        return split if split != _ndim(x) - 1 else None
    if name in UNPACKS:
        return split if split != value.attrs["axis"] % _ndim(x) else None
    if name in SLICES:
        sliced = {a % _ndim(x) for a in value.attrs["axes"]}
        return split if split not in sliced else None
    if name in ("permute_dims", "layout_cast"):
        return permutation(value, split)
    if name == "quantize_int8":
        channel = value.attrs.get("axis", 0) % _ndim(x)
        return (split, 0) if channel == split else None
    return (0, 0) if split == 0 else None  # quantize_int4: rows are independent


def gather_split(call: Call, splits: dict[Var, Split], length: int) -> Split | None:
    """The split of `take_along_axis(x, indices, axis)` with constant indices: along another
    axis than x's split, x's split (the indices broadcast along it, or are cut with x's
    blocks); of an x the blocks take whole, the gathered axis, when the indices hold one entry
    per index of the chain (each block gathers with its own entries). Indices that are a
    value the blocks take whole (GPTQ's g_idx) must broadcast along x's split."""
    x, indices = call.args
    axis: int = call.attrs["axis"]
    ndim = _ndim(x)
    split = splits.get(x) if isinstance(x, Var) else None
    if isinstance(indices, Var) and indices not in splits and isinstance(split, int):
        return split if split != axis and _broadcasts(indices, ndim, split) else None
    if not isinstance(indices, Constant):
        return None
    if isinstance(split, int):
        fits_blocks = const_axis(indices, ndim, split, length) != -2
        return split if split != axis and fits_blocks else None
    if isinstance(x, Var) and split is None and const_axis(indices, ndim, axis, length) == axis:
        return axis
    return None


def _reduced_split(call: Call, split: int) -> int | None:
    """Where the split axis is after a reduction over other axes (None if it is reduced)."""
    ndim = _ndim(call.args[0])
    axis = call.attrs.get("axis")
    reduced = set(range(ndim)) if axis is None else {a % ndim for a in axis}
    if split in reduced:
        return None
    return split if call.attrs.get("keepdims") else split - sum(1 for a in reduced if a < split)


def permutation(call: Call, split: int) -> int:
    """Where axis `split` of a `permute_dims` operand lands in its result."""
    ndim = _ndim(call.args[0])
    axes = call.attrs.get("axes")
    order = list(reversed(range(ndim))) if axes is None else [a % ndim for a in axes]
    return order.index(split)


def elementwise_split(call: Call, splits: dict[Var, Split], length: int) -> Split | None:
    """The split of a binary op whose chain operands split alike and keep the result's shape,
    and whose constants are constant along the split or give one entry per index of it."""
    out = struct_info_of(call)
    assert isinstance(out, TensorStructInfo)
    chained = [a for a in call.args if isinstance(a, Var) and a in splits]
    found = {splits.get(a) for a in chained}
    if len(found) != 1 or any(shape_of(a) != out.static_shape for a in chained):
        return None
    split = found.pop()
    if not isinstance(split, int):
        return None
    for arg in call.args:
        if isinstance(arg, Constant) and const_axis(arg, out.ndim, split, length) == -2:
            return None
        if isinstance(arg, Var) and arg not in splits and not _broadcasts(arg, out.ndim, split):
            return None
    return split


def _broadcasts(var: Var, ndim: int, split: int) -> bool:
    """Whether the free operand `var` is the same for every index of the split axis."""
    shape = shape_of(var)
    if shape is None:
        return False
    axis = split - (ndim - len(shape))
    return axis < 0 or shape[axis] == 1


def const_axis(const: Constant, ndim: int, split: int, length: int) -> int:
    """The axis of `const` to slice with the blocks of a result split along `split`: -1 when
    it broadcasts along the split (nothing to slice), -2 when it cannot be cut in blocks."""
    axis = split - (ndim - const.data.ndim)
    if axis < 0 or const.data.shape[axis] == 1:
        return -1
    return axis if const.data.shape[axis] == length else -2


def shape_of(expr: object) -> tuple[int, ...] | None:
    sinfo = struct_info_of(expr)  # type: ignore[arg-type]
    return sinfo.static_shape if isinstance(sinfo, TensorStructInfo) else None


def _ndim(expr: object) -> int:
    sinfo = struct_info_of(expr)  # type: ignore[arg-type]
    assert isinstance(sinfo, TensorStructInfo)
    return sinfo.ndim


def fits(sinfo: StructInfo, split: Split, length: int) -> bool:
    """Whether a value of `sinfo` has static dims and `length` indices along `split`."""
    if isinstance(sinfo, TupleStructInfo) and isinstance(split, tuple):
        if len(sinfo.fields) != len(split):
            return False
        return all(fits(f, s, length) for f, s in zip(sinfo.fields, split, strict=True))
    if not isinstance(sinfo, TensorStructInfo) or not isinstance(split, int):
        return False
    shape = sinfo.static_shape
    return shape is not None and 0 <= split < len(shape) and shape[split] == length


def row_bytes_of(sinfo: StructInfo, length: int) -> int:
    """Bytes per index of the split axis of the widest tensor in `sinfo`."""
    if isinstance(sinfo, TupleStructInfo):
        return max((row_bytes_of(f, length) for f in sinfo.fields), default=0)
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
    return tensor_nbytes(sinfo.dtype, sinfo.static_shape) // length
