"""Unpacking bit fields: `unpack_bits(x, bits, axis, dtype)` reads each int32 of x as
32 / bits unsigned fields of `bits` bits, lowest first, laid out along `axis` (which grows
by that factor), as GPTQ and compressed-tensors pack 2-, 4- and 8-bit weights and zero points
into int32 words. Imports `ir` only.
"""

from __future__ import annotations

from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import IntImm, const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_dtype,
    as_int,
    attr,
    fail,
    make_call,
    norm_axis,
    register,
    require_dtype,
    tensor_operand,
)

FIELD_BITS = (2, 4, 8)
"""The field widths an int32 word divides into evenly."""
FIELD_DTYPES = ("int8", "int16", "int32")
"""The dtypes a field may be read into (each holds every field of 8 bits or fewer)."""


def fields_per_word(bits: int) -> int:
    """How many fields of `bits` bits one int32 word holds."""
    return 32 // bits


def _infer_unpack_bits(call: Call) -> TensorStructInfo:
    """x's shape with `axis` times 32 / bits, in `dtype`."""
    x = tensor_operand(call, 0)
    require_dtype("unpack_bits", x, "int32", "x")
    bits, dtype = attr(call, "bits"), attr(call, "dtype")
    if bits not in FIELD_BITS:
        fail("unpack_bits", f"expected bits in {list(FIELD_BITS)}, got {bits}")
    if dtype not in FIELD_DTYPES:
        fail("unpack_bits", f"expected dtype in {list(FIELD_DTYPES)}, got {dtype!r}")
    if x.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    at = norm_axis("unpack_bits", attr(call, "axis"), x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, dtype, x.ndim)
    extent = const_int(x.shape[at])
    if extent is None:
        fail("unpack_bits", f"expected a static extent along axis {at}, got {x.shape[at]}")
    dims = list(x.shape)
    dims[at] = IntImm(extent * fields_per_word(bits), "int64")
    return TensorStructInfo(tuple(dims), dtype)


def unpack_bits(x: Expr, bits: int, axis: int = -1, dtype: str = "int8") -> Call:
    """`R.unpack_bits(x, bits=4, axis=0, dtype="int8")`: the `bits`-bit fields of each int32
    of x along `axis`, lowest first, each an unsigned value in `dtype`."""
    return make_call("unpack_bits", [x], {"bits": bits, "axis": axis, "dtype": dtype})


register(
    OpDef(
        "unpack_bits",
        (
            OpParam("x", "expr"),
            OpParam("bits", "attr"),
            OpParam("axis", "attr", required=False, default=-1),
            OpParam("dtype", "attr", required=False, default="int8"),
        ),
        _infer_unpack_bits,
        normalize={"bits": as_int, "axis": as_int, "dtype": as_dtype},
    ),
)
