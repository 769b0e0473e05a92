"""Short script-like spellings of struct info and dims, for error messages of every layer.

The full printer lives in `lazyparams.script`, far above; messages only need a compact form
such as `R.Tensor((n, 4), "float32")`. Imports `ir.prim` and `ir.struct_info` only.
"""

from __future__ import annotations

from lazyparams.ir.prim import (
    BinaryOp,
    Cast,
    FloatImm,
    IntImm,
    Intrinsic,
    Not,
    PrimExpr,
    PrimVar,
    Select,
)
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)


def show_dim(expr: PrimExpr) -> str:
    """A prim expression as it would be written in a script (`n * 4`, `T.max(a, b)`)."""
    return _strip(_show(expr))


def _show(expr: PrimExpr) -> str:
    if isinstance(expr, IntImm | FloatImm):
        return str(expr.value)
    if isinstance(expr, PrimVar):
        return expr.name
    if isinstance(expr, BinaryOp):
        if expr.symbol is not None:
            return f"({_show(expr.a)} {expr.symbol} {_show(expr.b)})"
        return f"T.{expr.script_name}({_show(expr.a)}, {_show(expr.b)})"
    if isinstance(expr, Not):
        return f"not {_show(expr.a)}"
    if isinstance(expr, Cast):
        return f'T.Cast("{expr.target_dtype}", {_show(expr.value)})'
    if isinstance(expr, Select):
        parts = (expr.condition, expr.true_value, expr.false_value)
        return f"T.if_then_else({', '.join(_show(p) for p in parts)})"
    if isinstance(expr, Intrinsic):
        return f"T.{expr.name}({', '.join(_show(a) for a in expr.args)})"
    return type(expr).__name__


def show_shape(shape: tuple[PrimExpr, ...]) -> str:
    """A shape as a Python tuple literal: `(n, 4)`, `(3,)`, `()`."""
    inner = ", ".join(show_dim(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def describe(sinfo: StructInfo) -> str:
    """Struct info in its script spelling, for messages."""
    if isinstance(sinfo, TensorStructInfo):
        dtype = f'"{sinfo.dtype}"' if sinfo.dtype else '""'
        if sinfo.shape is not None:
            return f"R.Tensor({show_shape(sinfo.shape)}, {dtype})"
        return f"R.Tensor(ndim={sinfo.ndim}, dtype={dtype})"
    if isinstance(sinfo, TupleStructInfo):
        return f"R.Tuple({', '.join(describe(f) for f in sinfo.fields)})"
    if isinstance(sinfo, ObjectStructInfo):
        return "R.Object"
    if isinstance(sinfo, PrimStructInfo):
        return f'R.Prim("{sinfo.dtype}")'
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(show_dim(v) for v in sinfo.values)}])"
        return f"R.Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, FuncStructInfo):
        return "R.Callable"
    return type(sinfo).__name__


def _strip(text: str) -> str:
    """Drop the outer parentheses a binary dim carries, at the top level of a shape only."""
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text
