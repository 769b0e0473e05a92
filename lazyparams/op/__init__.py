"""The operator layer: every op of the script syntax, registered with its inference and purity.

Importing this package fills `lazyparams.ir.op_registry`. Each op also has a constructor here
(`op.permute_dims(x, axes=[1, 0])`, ...) that builds the Call and checks it at once; the
parser builds calls through `make_call`, so both agree on attrs. Imports `ir` and `tir` only.
"""

from lazyparams.ir.op_registry import SINFO_ARG_KEYWORDS
from lazyparams.op.base import (
    OpDef,
    call_op_name,
    make_call,
    normalize_attrs,
    register,
    typed_call,
)
from lazyparams.op.binary import add, broadcast_shapes, divide, matmul, multiply, subtract
from lazyparams.op.builtin import (
    call_packed,
    call_pure_packed,
    call_tir,
    kill_object,
    stop_lift_params,
)
from lazyparams.op.create import const, ones, prim_value, zeros
from lazyparams.op.describe import describe, show_dim
from lazyparams.op.dims import dims_equal
from lazyparams.op.gguf import dequantize_gguf, quantize_gguf
from lazyparams.op.index import concat, split, strided_slice, take
from lazyparams.op.layout_cast import layout_cast
from lazyparams.op.manipulate import astype, expand_dims, permute_dims, reshape
from lazyparams.op.nn import conv2d
from lazyparams.op.quantize import dequantize_int4, dequantize_int8, quantize_int4, quantize_int8

__all__ = [
    "SINFO_ARG_KEYWORDS",
    "OpDef",
    "add",
    "astype",
    "broadcast_shapes",
    "call_op_name",
    "call_packed",
    "call_pure_packed",
    "call_tir",
    "concat",
    "const",
    "conv2d",
    "dequantize_gguf",
    "dequantize_int4",
    "dequantize_int8",
    "describe",
    "dims_equal",
    "divide",
    "expand_dims",
    "kill_object",
    "layout_cast",
    "make_call",
    "matmul",
    "multiply",
    "normalize_attrs",
    "ones",
    "permute_dims",
    "prim_value",
    "quantize_gguf",
    "quantize_int4",
    "quantize_int8",
    "register",
    "reshape",
    "show_dim",
    "split",
    "stop_lift_params",
    "strided_slice",
    "subtract",
    "take",
    "typed_call",
    "zeros",
]
