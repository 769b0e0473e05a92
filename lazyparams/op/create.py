"""Values made from nothing: the `zeros` and `ones` ops, constants and prim values.

`zeros(shape, dtype)` and `ones(shape, dtype)` take no operands, only attrs; `const` and
`prim_value` build the `Constant` and `PrimValue` leaves the script spells `R.const(...)` and
`R.prim_value(...)`. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lazyparams.ir.describe import show_shape
from lazyparams.ir.dtype import from_numpy, is_dtype, to_numpy
from lazyparams.ir.expr import Call, Constant, PrimValue, ShapeExpr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import PrimExpr, as_prim, const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_dtype,
    as_shape,
    attr,
    call_op_name,
    fail,
    make_call,
    register,
)

Shape = Sequence[PrimExpr | int] | ShapeExpr


def _infer_filled(call: Call) -> TensorStructInfo:
    """A tensor of the given shape and dtype; static dims must not be negative."""
    name = call_op_name(call)
    shape = attr(call, "shape")
    for d in shape:
        value = const_int(d)
        if value is not None and value < 0:
            fail(name, f"expected non-negative dims, got {show_shape(shape)}")
    return TensorStructInfo(shape, attr(call, "dtype"))


def zeros(shape: Shape, dtype: str) -> Call:
    """`R.zeros(shape, dtype)`: a tensor of zeros."""
    return make_call("zeros", [], {"shape": shape, "dtype": dtype})


def ones(shape: Shape, dtype: str) -> Call:
    """`R.ones(shape, dtype)`: a tensor of ones."""
    return make_call("ones", [], {"shape": shape, "dtype": dtype})


def const(value: Any, dtype: str | None = None) -> Constant:
    """`R.const(value, dtype)`: a tensor constant from a number, nested list or numpy array.

    Without a dtype an array keeps its own; a Python bool is bool, an int int32 and a float
    float32, as Relax has it.
    """
    import numpy as np

    target = _const_dtype(value, dtype)
    try:
        data = np.asarray(value, dtype=to_numpy(target))
    except (TypeError, ValueError, OverflowError) as err:
        fail("const", f"expected a number or a nested list of numbers for {target}, got {err}")
    return Constant(data)


def _const_dtype(value: Any, dtype: str | None) -> str:
    import numpy as np

    if dtype is not None:
        if not is_dtype(dtype):
            fail("const", f"expected a dtype name, got {dtype!r}")
        return dtype
    if isinstance(value, np.ndarray | np.generic):
        if not is_dtype(str(value.dtype)):
            fail("const", f"expected an array of an IR dtype, got one of {value.dtype}")
        return from_numpy(value.dtype)
    try:
        kind = np.asarray(value).dtype.kind
    except (TypeError, ValueError) as err:
        fail("const", f"expected a number or a nested list of numbers, got {err}")
    defaults = {"b": "bool", "i": "int32", "u": "int32", "f": "float32"}
    if kind not in defaults:
        fail("const", f"expected a number or a nested list of numbers, got {value!r}")
    return defaults[kind]


def prim_value(value: int | float | PrimExpr) -> PrimValue:
    """`R.prim_value(value)`: a scalar from a Python number or a prim expression."""
    if not isinstance(value, int | float | PrimExpr):
        fail("prim_value", f"expected an int, a float or a prim expression, got {value!r}")
    return PrimValue(as_prim(value))


_SHAPE_DTYPE = (OpParam("shape", "attr"), OpParam("dtype", "attr"))
_NORMALIZE = {"shape": as_shape, "dtype": as_dtype}

register(
    OpDef("zeros", _SHAPE_DTYPE, _infer_filled, normalize=_NORMALIZE),
    OpDef("ones", _SHAPE_DTYPE, _infer_filled, normalize=_NORMALIZE),
)
