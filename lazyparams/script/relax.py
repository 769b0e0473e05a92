"""The `R` namespace of the script syntax: `@R.function` and the struct info spellings.

Only what Python evaluates while creating a class needs to exist here: the decorator and the
annotations of signatures (`R.Tensor`, `R.Tuple`, `R.Object`, ...), which return real struct
info. Function bodies are never run; the parser reads them. Imports `ir` and the parser.
"""

from __future__ import annotations

import typing
from collections import abc

from lazyparams.ir.expr import BaseFunc
from lazyparams.ir.prim import PrimExpr, PrimVar
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.script.decorate import parse_standalone
from lazyparams.script.markers import ScriptFunction, Unchecked, in_class_body, lenient

Dim = int | str | PrimExpr
_Def = abc.Callable[..., typing.Any]


def function(func: _Def | None = None, *, pure: bool = True, private: bool = False) -> typing.Any:
    """`@R.function` / `@R.function(pure=False)`: a Relax function read from its source.

    Inside an `@I.ir_module` class it returns a marker (the class decorator parses the whole
    class); standalone it returns the parsed `Function`.
    """
    del pure, private  # the parser reads them from the decorator's source

    def wrap(f: _Def) -> BaseFunc | ScriptFunction:
        return ScriptFunction("R.function", f) if in_class_body(f) else parse_standalone(f)

    return wrap(func) if func is not None else wrap


def _dims(shape: abc.Sequence[Dim]) -> tuple[PrimExpr | int, ...]:
    """Dims of an evaluated annotation; a "string" dim stands for a symbolic var."""
    return tuple(PrimVar(d) if isinstance(d, str) else d for d in shape)


def Tensor(
    shape: abc.Sequence[Dim] | str | None = None, dtype: str | None = None, ndim: int = -1
) -> TensorStructInfo | Unchecked:
    """`R.Tensor((3, n), dtype="float32")`, `R.Tensor(dtype="float32", ndim=2)`, `R.Tensor`."""
    if isinstance(shape, str) and dtype is None:
        shape, dtype = None, shape
    dims = None if shape is None or isinstance(shape, str) else _dims(shape)
    return lenient("R.Tensor", lambda: TensorStructInfo(dims, dtype or "", ndim))  # type: ignore[arg-type]


def Tuple(*fields: StructInfo | Unchecked) -> TupleStructInfo | Unchecked:
    """`R.Tuple(a, b)`; `R.Tuple` with no fields is the unit value."""
    bad = [f for f in fields if not isinstance(f, StructInfo)]
    if bad:
        return Unchecked("R.Tuple", f"a field is not struct info: {bad[0]!r}")
    return TupleStructInfo(typing.cast(tuple[StructInfo, ...], fields))


Object = ObjectStructInfo()
"""`R.Object`: any value."""

Any = Object
"""`R.Any`: the spelling of later releases for `R.Object`."""


def Prim(dtype: str = "int64", value: Dim | None = None) -> PrimStructInfo | Unchecked:
    """`R.Prim("int64")`: a scalar."""
    prim = None if value is None else _dims([value])[0]
    return lenient("R.Prim", lambda: PrimStructInfo(dtype, prim))  # type: ignore[arg-type]


def Shape(values: abc.Sequence[Dim] | None = None, ndim: int = -1) -> ShapeStructInfo:
    """`R.Shape([n, 4])` or `R.Shape(ndim=2)`."""
    dims = None if values is None else _dims(values)
    return ShapeStructInfo(dims, ndim)  # type: ignore[arg-type]


def Callable(
    params: abc.Sequence[StructInfo] | None, ret: StructInfo, purity: bool = True
) -> FuncStructInfo:
    """`R.Callable([R.Prim("int64")], R.Object, purity=False)`: a function value."""
    return FuncStructInfo(None if params is None else tuple(params), ret, purity)


__all__ = ["Any", "Callable", "Object", "Prim", "Shape", "Tensor", "Tuple", "function"]
