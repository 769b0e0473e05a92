"""GGML block quantization: float tensors to block types and back.

`quantize_gguf(x, type)` keeps x's logical shape in block dtype `type` (see
`lazyparams.block_types`); `dequantize_gguf(q, type, dtype)` gives floats of q's shape (the
type is spelled out, as the kernel sees only q's bytes). The last dim
must be a whole number of blocks; rows (every leading index) are independent. Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.block_types import BLOCK_TYPES, QUANTIZABLE
from lazyparams.ir.dtype import block_type
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_dtype,
    attr,
    fail,
    make_call,
    register,
    require_float,
    tensor_operand,
)

DEQUANTIZED_DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes `dequantize_gguf` gives (values are computed in float32, then rounded)."""


def _check_rows(op: str, t: TensorStructInfo, type_name: str, what: str) -> None:
    """Refuse a 0-d tensor or a static last dim that is not a whole number of blocks."""
    if t.ndim == 0:
        fail(op, f"expected {what} of rank >= 1 (rows of {type_name} blocks), got a 0-d tensor")
    if t.shape is None or not t.shape:
        return
    size = block_type(type_name).block_size
    last = const_int(t.shape[-1])
    if last is not None and last % size != 0:
        fail(
            op,
            f"expected {what}'s last dim to be a multiple of {type_name}'s block of {size} "
            f"values, got {last}",
        )


def _any_type(op: str, name: str, value: object) -> str:
    """A `type` attr naming a GGML block type."""
    if not isinstance(value, str) or value not in BLOCK_TYPES:
        listed = ", ".join(BLOCK_TYPES)
        fail(op, f"expected {name} to be a GGML block type ({listed}), got {value!r}")
    return str(value)  # the parser's dtype strings are a str subclass


def _quantized_type(op: str, name: str, value: object) -> str:
    """The `type` attr of `quantize_gguf`: a block type that has a quantizer."""
    value = _any_type(op, name, value)
    if value not in QUANTIZABLE:
        fail(
            op,
            f"block type {value} can be read but not written; expected one of "
            f"{', '.join(sorted(QUANTIZABLE))}",
        )
    return value


def _float_dtype(op: str, name: str, value: object) -> str:
    """The `dtype` attr of `dequantize_gguf`: float32, float16 or bfloat16."""
    dtype = as_dtype(op, name, value)
    if dtype not in DEQUANTIZED_DTYPES:
        fail(op, f"expected {name} to be one of {', '.join(DEQUANTIZED_DTYPES)}, got {dtype}")
    return dtype


def _infer_quantize_gguf(call: Call) -> TensorStructInfo:
    """x's shape in the block dtype `type`; x must be a float tensor of whole blocks a row."""
    x = tensor_operand(call, 0)
    type_name: str = attr(call, "type")
    require_float("quantize_gguf", x)
    _check_rows("quantize_gguf", x, type_name, "x")
    return TensorStructInfo(x.shape, type_name, x.ndim)


def _infer_dequantize_gguf(call: Call) -> TensorStructInfo:
    """q's shape in `dtype`; q must be of the block dtype `type`."""
    q = tensor_operand(call, 0, "q")
    type_name: str = attr(call, "type")
    dtype: str = attr(call, "dtype")
    if q.dtype and q.dtype != type_name:
        fail("dequantize_gguf", f"expected q of block type {type_name}, got {q.dtype}")
    _check_rows("dequantize_gguf", q, type_name, "q")
    return TensorStructInfo(q.shape, dtype, q.ndim)


def quantize_gguf(x: Expr, type: str) -> Call:
    """`R.quantize_gguf(x, "q8_0")`: x's rows in GGML blocks of `type`."""
    return make_call("quantize_gguf", [x], {"type": type})


def dequantize_gguf(q: Expr, type: str, dtype: str = "float32") -> Call:
    """`R.dequantize_gguf(q, "q8_0", dtype="float32")`: the floats GGML blocks stand for."""
    return make_call("dequantize_gguf", [q], {"type": type, "dtype": dtype})


register(
    OpDef(
        "quantize_gguf",
        (OpParam("x", "expr"), OpParam("type", "attr")),
        _infer_quantize_gguf,
        normalize={"type": _quantized_type},
    ),
    OpDef(
        "dequantize_gguf",
        (
            OpParam("q", "expr"),
            OpParam("type", "attr"),
            OpParam("dtype", "attr", required=False, default="float32"),
        ),
        _infer_dequantize_gguf,
        normalize={"type": _any_type, "dtype": _float_dtype},
    ),
)
