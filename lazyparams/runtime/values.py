"""Run-time checks of values against struct info, binding symbolic dims, and their messages.

`match_value` is what `match_cast`, parameter checks and declared var types share: it checks
dtype and shape and binds each symbolic dim on its first sight. Imports `ir`, `tir` and `op`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.errors import LazyParamsError, RuntimeExecError
from lazyparams.ir.describe import describe
from lazyparams.ir.dtype import block_type, from_numpy, is_block, to_numpy
from lazyparams.ir.expr import Call, Var
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar, operands
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.tir.eval import eval_scalar

Symbols = dict[PrimVar, int]


def describe_value(value: Any) -> str:
    """A short description of a run-time value for error messages."""
    if isinstance(value, np.ndarray):
        try:
            dtype = from_numpy(value.dtype)
        except LazyParamsError:
            dtype = str(value.dtype)
        return f"{dtype} array of shape {value.shape}"
    if isinstance(value, tuple):
        return f"tuple of {len(value)} ({', '.join(describe_value(v) for v in value)})"
    if isinstance(value, bool | int | float | str | np.generic):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


def scalar(expr: PrimExpr, symbols: Symbols, what: str = "") -> int | float | bool:
    """A prim expression's value given the bound symbolic dims; errors are prefixed by `what`."""
    if isinstance(expr, IntImm) and expr.dtype != "bool":
        return expr.value  # the common case of static dims, without the evaluator's set-up
    if isinstance(expr, PrimVar) and expr in symbols:
        return symbols[expr]
    try:
        return eval_scalar(expr, symbols)
    except RuntimeExecError as err:
        if not what:
            raise
        raise RuntimeExecError(f"{what}: {err}") from None


def returns_unit(call: Call) -> bool:
    """Whether a call of an extern or a callback is declared to return the unit tuple: TVM
    types `fset_output` as returning `R.Tuple()`, and a Python callback that returns nothing
    returns None, which then stands for that tuple."""
    if call.sinfo_args:
        declared: StructInfo | None = call.sinfo_args[0]
    else:
        callee = call.op.struct_info if isinstance(call.op, Var) else None
        declared = callee.ret if isinstance(callee, FuncStructInfo) else None
    return declared == TupleStructInfo(())


def shape_of(dims: tuple[PrimExpr, ...], symbols: Symbols, what: str) -> tuple[int, ...]:
    """A shape as ints; every symbolic dim in it must be bound already."""
    return tuple(int(scalar(d, symbols, what)) for d in dims)


def match_value(value: Any, sinfo: StructInfo, symbols: Symbols, what: str) -> None:
    """Check `value` against `sinfo`, binding unbound symbolic dims into `symbols`.

    Raises `RuntimeExecError` naming `what` (the param, binding or match_cast) and saying what
    was expected and what was found.
    """
    if not _matches(value, sinfo, symbols):
        raise RuntimeExecError(
            f"{what}: expected {describe(sinfo)}, got {describe_value(value)}"
            + _bound_note(sinfo, symbols)
        )


def _bound_note(sinfo: StructInfo, symbols: Symbols) -> str:
    """The values already bound to the symbolic dims `sinfo` mentions, for a mismatch message."""
    used = {v for d in _dims_of(sinfo) for v in _vars_in(d)}
    names = [f"{v.name} = {n}" for v, n in symbols.items() if v in used]
    return f" (with {', '.join(names)})" if names else ""


def _dims_of(sinfo: StructInfo) -> list[PrimExpr]:
    if isinstance(sinfo, TensorStructInfo):
        return list(sinfo.shape or ())
    if isinstance(sinfo, ShapeStructInfo):
        return list(sinfo.values or ())
    if isinstance(sinfo, PrimStructInfo):
        return [] if sinfo.value is None else [sinfo.value]
    if isinstance(sinfo, TupleStructInfo):
        return [d for f in sinfo.fields for d in _dims_of(f)]
    return []


def _vars_in(dim: PrimExpr) -> list[PrimVar]:
    if isinstance(dim, PrimVar):
        return [dim]
    return [v for inner in operands(dim) for v in _vars_in(inner)]


def _matches(value: Any, sinfo: StructInfo, symbols: Symbols) -> bool:
    check = _CHECKS.get(type(sinfo))
    return True if check is None else check(value, sinfo, symbols)


def _tensor(value: Any, sinfo: Any, symbols: Symbols) -> bool:
    if not isinstance(value, np.ndarray):
        return False
    if sinfo.dtype and value.dtype != to_numpy(sinfo.dtype):
        return False
    if sinfo.ndim != -1 and value.ndim != sinfo.ndim:
        return False
    shape = _logical_shape(value, sinfo.dtype)
    return shape is not None and (sinfo.shape is None or _dims(sinfo.shape, shape, symbols))


def _logical_shape(value: np.ndarray[Any, Any], dtype: str) -> tuple[int, ...] | None:
    """The element shape `value` holds: its own, or for a block type the values its rows of
    block bytes stand for (None when a row is not a whole number of blocks)."""
    if not is_block(dtype):
        return tuple(value.shape)
    block = block_type(dtype)
    if value.ndim == 0 or value.shape[-1] % block.type_size:
        return None
    return block.logical_shape(tuple(value.shape))


def _dims(dims: tuple[PrimExpr, ...], actual: tuple[int, ...], symbols: Symbols) -> bool:
    """Bind bare symbolic dims first, then check every dim (compound ones need their vars)."""
    for dim, n in zip(dims, actual, strict=True):
        if isinstance(dim, PrimVar) and symbols.setdefault(dim, n) != n:
            return False
    try:
        return all(scalar(d, symbols) == n for d, n in zip(dims, actual, strict=True))
    except RuntimeExecError:
        return False


def _tuple(value: Any, sinfo: Any, symbols: Symbols) -> bool:
    if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
        return False
    return all(_matches(v, f, symbols) for v, f in zip(value, sinfo.fields, strict=True))


def _prim(value: Any, sinfo: Any, symbols: Symbols) -> bool:
    if not isinstance(value, bool | int | float | np.generic):
        return False
    if sinfo.value is None:
        return True
    if isinstance(sinfo.value, PrimVar) and sinfo.value not in symbols:
        symbols[sinfo.value] = int(value)
    try:
        return bool(scalar(sinfo.value, symbols) == value)
    except RuntimeExecError:
        return False


def _shape(value: Any, sinfo: Any, symbols: Symbols) -> bool:
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
        return False
    if sinfo.values is None:
        return sinfo.ndim in (-1, len(value))
    return len(value) == len(sinfo.values) and _dims(sinfo.values, value, symbols)


def _func(value: Any, sinfo: Any, symbols: Symbols) -> bool:
    return callable(value)


_CHECKS: dict[type[StructInfo], Callable[[Any, Any, Symbols], bool]] = {
    TensorStructInfo: _tensor,
    TupleStructInfo: _tuple,
    PrimStructInfo: _prim,
    ShapeStructInfo: _shape,
    FuncStructInfo: _func,
    ObjectStructInfo: lambda value, sinfo, symbols: True,
}
