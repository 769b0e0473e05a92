"""Two-operand arithmetic: add, subtract, multiply, divide, maximum, minimum (broadcasting) and
matmul.

Shapes follow numpy's broadcasting and matmul rules; both operands must share a dtype, which
the result keeps (matmul may name another with `out_dtype`). Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import zip_longest

from lazyparams.ir.describe import show_dim, show_shape
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import IntImm, PrimExpr
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_optional_dtype,
    attr,
    call_op_name,
    fail,
    make_call,
    register,
    same_dtype,
    tensor_operand,
)
from lazyparams.op.dims import dims_differ, dims_equal, is_one

_ONE = IntImm(1)


def broadcast_shapes(
    op: str, a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]
) -> tuple[PrimExpr, ...] | None:
    """numpy's broadcast of two shapes; None when a symbolic pair cannot be proven compatible."""
    out: list[PrimExpr] = []
    for da, db in zip_longest(reversed(a), reversed(b), fillvalue=_ONE):
        if is_one(da) or dims_equal(da, db):
            out.append(db)
        elif is_one(db):
            out.append(da)
        elif dims_differ(da, db):
            fail(op, f"expected shapes that broadcast, got {show_shape(a)} and {show_shape(b)}")
        else:
            return None
    return tuple(reversed(out))


def broadcast_struct(op: str, tensors: Sequence[TensorStructInfo], dtype: str) -> TensorStructInfo:
    """A tensor of `dtype` in the broadcast shape of `tensors` (only its rank where a shape is
    unknown or a symbolic pair unprovable)."""
    ndims = [t.ndim for t in tensors]
    ndim = -1 if -1 in ndims else max(ndims)
    shape: tuple[PrimExpr, ...] | None = ()
    for t in tensors:
        if t.shape is None:
            return TensorStructInfo(None, dtype, ndim)
        if shape is not None:
            shape = broadcast_shapes(op, shape, t.shape)
    return TensorStructInfo(shape, dtype, ndim)


def operand_pair(call: Call) -> tuple[TensorStructInfo, TensorStructInfo]:
    """The two tensor operands x1 and x2 of a binary op."""
    return tensor_operand(call, 0, "x1"), tensor_operand(call, 1, "x2")


def _infer_elementwise(call: Call) -> TensorStructInfo:
    """The broadcast shape in the operands' common dtype."""
    name = call_op_name(call)
    a, b = operand_pair(call)
    return broadcast_struct(name, (a, b), same_dtype(name, [a.dtype, b.dtype]))


def _elementwise(name: str, doc: str) -> Callable[[Expr, Expr], Call]:
    """The `R.<name>(x1, x2)` constructor of an elementwise op of two operands."""

    def build(x1: Expr, x2: Expr) -> Call:
        return make_call(name, [x1, x2])

    build.__name__ = build.__qualname__ = name
    build.__doc__ = doc
    return build


add = _elementwise("add", "`R.add(x1, x2)`: elementwise sum with numpy broadcasting.")
subtract = _elementwise(
    "subtract", "`R.subtract(x1, x2)`: elementwise difference with numpy broadcasting."
)
multiply = _elementwise(
    "multiply", "`R.multiply(x1, x2)`: elementwise product with numpy broadcasting."
)
divide = _elementwise(
    "divide",
    "`R.divide(x1, x2)`: elementwise quotient with numpy broadcasting, in the operands' dtype.",
)
maximum = _elementwise(
    "maximum", "`R.maximum(x1, x2)`: the larger of each pair with numpy broadcasting (NaN wins)."
)
minimum = _elementwise(
    "minimum", "`R.minimum(x1, x2)`: the smaller of each pair with numpy broadcasting (NaN wins)."
)


# matmul -------------------------------------------------------------------------------------


def _infer_matmul(call: Call) -> TensorStructInfo:
    """numpy's matmul: batch dims broadcast, a 1-D operand is a vector whose dim is dropped."""
    a, b = tensor_operand(call, 0, "x1"), tensor_operand(call, 1, "x2")
    dtype = same_dtype("matmul", [a.dtype, b.dtype])
    out_dtype = attr(call, "out_dtype") or dtype
    for what, t in (("x1", a), ("x2", b)):
        if t.ndim == 0:
            fail("matmul", f"expected {what} of rank >= 1, got a rank-0 tensor")
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, out_dtype)
    ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, out_dtype, ndim)
    shape = _matmul_shape(a.shape, b.shape)
    return TensorStructInfo(shape, out_dtype, ndim)


def _matmul_shape(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...] | None:
    """The result shape of `a @ b` (None when a symbolic dim leaves it unprovable)."""
    a2 = (_ONE, *a) if len(a) == 1 else a
    b2 = (*b, _ONE) if len(b) == 1 else b
    if dims_differ(a2[-1], b2[-2]):
        fail(
            "matmul",
            f"expected the contracted dims to agree, got {show_shape(a)} @ {show_shape(b)} "
            f"({show_dim(a2[-1])} against {show_dim(b2[-2])})",
        )
    batch = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    if batch is None or not dims_equal(a2[-1], b2[-2]):
        return None
    rows = (a2[-2],) if len(a) > 1 else ()
    cols = (b2[-1],) if len(b) > 1 else ()
    return batch + rows + cols


def matmul(x1: Expr, x2: Expr, out_dtype: str | None = None) -> Call:
    """`R.matmul(x1, x2, out_dtype=None)`: numpy's matmul; the result dtype may be overridden."""
    return make_call("matmul", [x1, x2], {"out_dtype": out_dtype})


_OPERANDS = (OpParam("x1", "expr"), OpParam("x2", "expr"))

register(
    *(
        OpDef(name, _OPERANDS, _infer_elementwise)
        for name in ("add", "subtract", "multiply", "divide", "maximum", "minimum")
    ),
    OpDef(
        "matmul",
        (*_OPERANDS, OpParam("out_dtype", "attr", required=False)),
        _infer_matmul,
        normalize={"out_dtype": as_optional_dtype},
    ),
)
