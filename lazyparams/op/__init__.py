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
from lazyparams.op.binary import (
    add,
    broadcast_shapes,
    divide,
    matmul,
    maximum,
    minimum,
    multiply,
    subtract,
)
from lazyparams.op.builtin import (
    call_packed,
    call_pure_packed,
    call_tir,
    kill_object,
    stop_lift_params,
)
from lazyparams.op.compare import (
    equal,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_or,
    not_equal,
    where,
)
from lazyparams.op.create import const, ones, prim_value, zeros
from lazyparams.op.describe import describe, show_dim
from lazyparams.op.dims import dims_equal
from lazyparams.op.gguf import dequantize_gguf, quantize_gguf
from lazyparams.op.index import concat, split, strided_slice, take, take_along_axis
from lazyparams.op.layout_cast import layout_cast
from lazyparams.op.manipulate import astype, expand_dims, permute_dims, reshape
from lazyparams.op.mt19937 import mt_seed, mt_skip, mt_uniform
from lazyparams.op.nn import conv2d
from lazyparams.op.quantize import dequantize_int4, dequantize_int8, quantize_int4, quantize_int8
from lazyparams.op.rank import rank_mask, sort_rank
from lazyparams.op.reduce import max, mean, min, sum
from lazyparams.op.unary import abs, acos, cos, exp, log, negative, sign, sin, sqrt, square
from lazyparams.op.unpack import unpack_bits

__all__ = [
    "SINFO_ARG_KEYWORDS",
    "OpDef",
    "abs",
    "acos",
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
    "cos",
    "dequantize_gguf",
    "dequantize_int4",
    "dequantize_int8",
    "describe",
    "dims_equal",
    "divide",
    "equal",
    "exp",
    "expand_dims",
    "greater",
    "greater_equal",
    "kill_object",
    "layout_cast",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_or",
    "make_call",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mt_seed",
    "mt_skip",
    "mt_uniform",
    "multiply",
    "negative",
    "normalize_attrs",
    "not_equal",
    "ones",
    "permute_dims",
    "prim_value",
    "quantize_gguf",
    "quantize_int4",
    "quantize_int8",
    "rank_mask",
    "register",
    "reshape",
    "show_dim",
    "sign",
    "sin",
    "sort_rank",
    "split",
    "sqrt",
    "square",
    "stop_lift_params",
    "strided_slice",
    "subtract",
    "sum",
    "take",
    "take_along_axis",
    "typed_call",
    "unpack_bits",
    "where",
    "zeros",
]
