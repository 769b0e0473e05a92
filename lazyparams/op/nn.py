"""Neural-network ops of TVM's `R.nn` namespace that weight transforms meet: conv2d.

`R.nn.conv2d` appears in model functions whose weights LiftTransformParams lifts (a conv
kernel re-laid out once, not at every call). Only the NCHW data / OIHW kernel layouts are
supported; others are refused by name. Attrs are normalised as TVM prints them (two strides,
four paddings, two dilations). Imports `ir` and the op layer's helpers.
"""

from __future__ import annotations

from typing import Any

from lazyparams.ir.describe import show_dim
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import FloorDiv, IntImm, PrimExpr, as_prim, const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    Normalizer,
    OpDef,
    as_int,
    as_int_or_ints,
    as_optional_dtype,
    attr,
    fail,
    make_call,
    register,
    same_dtype,
    tensor_operand,
)
from lazyparams.op.dims import dims_differ, simplify

OP = "nn.conv2d"
LAYOUTS = {"data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW"}


def _pair(op: str, name: str, value: Any) -> tuple[int, int]:
    """An attr of one int or two (height, width)."""
    ints = as_int_or_ints(op, name, value)
    ints = (ints, ints) if isinstance(ints, int) else ints
    if len(ints) != 2 or min(ints) < 1:
        fail(op, f"expected {name} as one or two positive ints, got {value!r}")
    return (ints[0], ints[1])


def _padding(op: str, name: str, value: Any) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from one, two or four ints, as TVM reads it."""
    ints = as_int_or_ints(op, name, value)
    ints = (ints,) if isinstance(ints, int) else ints
    if len(ints) not in (1, 2, 4) or min(ints) < 0:
        fail(op, f"expected {name} as 1, 2 or 4 ints >= 0, got {value!r}")
    if len(ints) == 1:
        ints = ints * 4
    elif len(ints) == 2:
        ints = (*ints, *ints)
    return (ints[0], ints[1], ints[2], ints[3])


def _layout(op: str, name: str, value: Any) -> str:
    if value is None and name == "out_layout":
        return LAYOUTS[name]
    if value != LAYOUTS[name]:
        fail(op, f"expected {name}={LAYOUTS[name]!r} (the only layout supported), got {value!r}")
    return str(value)


def _optional_dtype(op: str, name: str, value: Any) -> str | None:
    """out_dtype: None (or TVM's "void") keeps the operands' dtype."""
    return None if value == "void" else as_optional_dtype(op, name, value)


def _infer_conv2d(call: Call) -> TensorStructInfo:
    """(N, C, H, W) * (O, C/groups, KH, KW) -> (N, O, H', W'), H' = (H + pads - dilated KH) //
    stride + 1; a symbolic H stays symbolic."""
    data, weight = tensor_operand(call, 0, "data"), tensor_operand(call, 1, "weight")
    dtype = attr(call, "out_dtype") or same_dtype(OP, [data.dtype, weight.dtype])
    if data.ndim not in (4, -1) or weight.ndim not in (4, -1):
        fail(OP, f"expected 4-D data and weight, got ranks {data.ndim} and {weight.ndim}")
    if data.shape is None or weight.shape is None:
        return TensorStructInfo(None, dtype, 4)
    groups = attr(call, "groups")
    n, channels, height, width = data.shape
    out_channels, per_group, kh, kw = weight.shape
    if dims_differ(channels, simplify(as_prim(per_group) * groups)):
        fail(
            OP,
            f"expected {groups} group(s) of the kernel's {show_dim(per_group)} input channels "
            f"to cover the data's channels, got {show_dim(channels)}",
        )
    top, left, bottom, right = attr(call, "padding")
    rows = _out_dim(height, kh, top + bottom, 0, call)
    cols = _out_dim(width, kw, left + right, 1, call)
    return TensorStructInfo((n, out_channels, rows, cols), dtype)


def _out_dim(size: PrimExpr, kernel: PrimExpr, pad: int, axis: int, call: Call) -> PrimExpr:
    """One spatial output dim; refused when the kernel does not fit the padded input."""
    stride, dilation = attr(call, "strides")[axis], attr(call, "dilation")[axis]
    k = const_int(kernel)
    if k is None:
        fail(OP, f"expected a kernel of static size, got {show_dim(kernel)}")
    span = simplify(size + (pad - dilation * (k - 1) - 1))
    value = const_int(span)
    if value is not None and value < 0:
        fail(
            OP,
            f"expected the kernel ({k}, dilation {dilation}) to fit the padded input "
            f"{show_dim(size)}",
        )
    if value is not None:
        return IntImm(value // stride + 1)
    return simplify(span + 1) if stride == 1 else simplify(FloorDiv(span, as_prim(stride)) + 1)


def conv2d(data: Expr, weight: Expr, **attrs: Any) -> Call:
    """`R.nn.conv2d(data, weight, strides=1, padding=0, dilation=1, groups=1, ...)`."""
    return make_call(OP, [data, weight], attrs)


_ATTRS: tuple[tuple[str, object, Normalizer], ...] = (
    ("strides", (1, 1), _pair),
    ("padding", (0, 0, 0, 0), _padding),
    ("dilation", (1, 1), _pair),
    ("groups", 1, as_int),
    *((name, layout, _layout) for name, layout in LAYOUTS.items()),
    ("out_dtype", None, _optional_dtype),
)
"""The attrs of conv2d, all optional: name, default and normaliser, in the order of TVM's."""

register(
    OpDef(
        OP,
        (
            OpParam("data", "expr"),
            OpParam("weight", "expr"),
            *(OpParam(name, "attr", required=False, default=value) for name, value, _ in _ATTRS),
        ),
        _infer_conv2d,
        normalize={name: normalize for name, _, normalize in _ATTRS},
    ),
)
