"""Script spellings of struct info and dims: the printer core's, and the messages' of every layer.

`sinfo_text` is what the printer writes in a signature or an annotation; `describe`,
`show_dim` and `show_shape` are the same code in the messages' spelling (names as written, the
dtype positional). Kept free of numpy, since every layer's errors use it. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Callable

from lazyparams.errors import LazyParamsError
from lazyparams.ir.prim import PrimExpr
from lazyparams.ir.print_prim import HintNames, PrimPrinter, quote, tuple_text
from lazyparams.ir.spelling import MESSAGE, Spelling
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

# the dims of messages: names as the user wrote them, so no table of unique names is kept
show_dim: Callable[[PrimExpr], str] = PrimPrinter(HintNames())


def show_shape(shape: tuple[PrimExpr, ...]) -> str:
    """A shape as a Python tuple literal: `(n, 4)`, `(3,)`, `()`."""
    return tuple_text([show_dim(d) for d in shape])


def describe(sinfo: StructInfo) -> str:
    """Struct info as messages spell it: `R.Tensor((n, 4), "float32")`."""
    return sinfo_text(sinfo, show_dim, MESSAGE)


def sinfo_text(sinfo: StructInfo, dim: Callable[[PrimExpr], str], spelling: Spelling) -> str:
    """Struct info in `spelling`; `dim` spells each dim. A prim is its dtype alone where the
    spelling writes prim params (TVM 0.27's `R.Prim` takes no value)."""

    def inner(field: StructInfo) -> str:
        return sinfo_text(field, dim, spelling)

    if isinstance(sinfo, TensorStructInfo):
        return _tensor_text(sinfo, dim, spelling.dtype_keyword)
    if isinstance(sinfo, TupleStructInfo):
        return f"R.Tuple({', '.join(map(inner, sinfo.fields))})" if sinfo.fields else "R.Tuple"
    if isinstance(sinfo, ObjectStructInfo):
        return spelling.object
    if isinstance(sinfo, PrimStructInfo):
        known = not spelling.prim_params and sinfo.value is not None
        value = f", value={dim(sinfo.value)}" if known else ""  # type: ignore[arg-type]
        return f"R.Prim({quote(sinfo.dtype)}{value})"
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(dim(v) for v in sinfo.values)}])"
        return "R.Shape" if sinfo.ndim == -1 else f"R.Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, FuncStructInfo):
        params = "None" if sinfo.params is None else f"[{', '.join(map(inner, sinfo.params))}]"
        purity = "" if sinfo.purity else ", purity=False"
        return f"R.Callable({params}, {inner(sinfo.ret)}{purity})"
    raise LazyParamsError(
        f"cannot print struct info {type(sinfo).__name__}; expected a node of ir.struct_info"
    )


def _tensor_text(sinfo: TensorStructInfo, dim: Callable[[PrimExpr], str], keyword: bool) -> str:
    parts = []
    if sinfo.shape is not None:
        parts.append(tuple_text([dim(d) for d in sinfo.shape]))
    if sinfo.dtype:
        positional = keyword is False and sinfo.shape is not None
        parts.append(quote(sinfo.dtype) if positional else f"dtype={quote(sinfo.dtype)}")
    if sinfo.shape is None and sinfo.ndim != -1:
        parts.append(f"ndim={sinfo.ndim}")
    return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"


def tuple_fields(sinfo: StructInfo | None, text: Callable[[StructInfo], str]) -> list[str]:
    """Field texts of a non-empty tuple struct info (what a long annotation wraps), else []."""
    if isinstance(sinfo, TupleStructInfo):
        return [text(f) for f in sinfo.fields]
    return []
