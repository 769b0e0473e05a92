"""Struct info of any Relax expression: stored on vars, derived for everything else.

Calls to ops use the op registry's inference; calls to externs and functions use their declared
`sinfo_args`. Imports the other `ir` modules only.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from lazyparams.errors import StructInfoError
from lazyparams.ir.describe import describe
from lazyparams.ir.dtype import from_numpy
from lazyparams.ir.expr import (
    Call,
    Constant,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.op_registry import OpInfo, op_info
from lazyparams.ir.prim import IntImm
from lazyparams.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from lazyparams.ir.struct_info_lca import struct_info_lca


def struct_info_of(expr: Expr) -> StructInfo:
    """The struct info of `expr`; raises `StructInfoError` when an op rejects its operands."""
    if isinstance(expr, Var):
        return expr.struct_info if expr.struct_info is not None else ObjectStructInfo()
    if isinstance(expr, Call):
        return _call_struct_info(expr)
    if isinstance(expr, Tuple):
        return TupleStructInfo(tuple(struct_info_of(f) for f in expr.fields))
    if isinstance(expr, TupleGetItem):
        return _tuple_field(expr)
    if isinstance(expr, Constant):
        shape = tuple(IntImm(d) for d in expr.data.shape)
        return TensorStructInfo(shape, from_numpy(expr.data.dtype))
    if isinstance(expr, PrimValue):
        return PrimStructInfo(expr.value.dtype, expr.value)
    if isinstance(expr, ShapeExpr):
        return ShapeStructInfo(expr.values)
    if isinstance(expr, SeqExpr):
        return struct_info_of(expr.body)
    if isinstance(expr, If):
        return struct_info_lca(struct_info_of(expr.true_branch), struct_info_of(expr.false_branch))
    if isinstance(expr, Function):
        params = tuple(struct_info_of(p) for p in expr.params)
        return FuncStructInfo(params, expr.ret_struct_info, expr.is_pure)
    if isinstance(expr, (StringImm, ExternFunc, GlobalVar, Op)):
        return ObjectStructInfo()
    raise StructInfoError(f"expected a Relax expression, got {type(expr).__name__}")


def _call_struct_info(call: Call) -> StructInfo:
    if isinstance(call.op, Op):
        return _op_struct_info(call, op_info(call.op))
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    if call.sinfo_args:
        return TupleStructInfo(call.sinfo_args)
    callee = struct_info_of(call.op)
    return callee.ret if isinstance(callee, FuncStructInfo) else ObjectStructInfo()


_INFERRED: dict[Hashable, tuple[StructInfo, tuple[object, ...]]] = {}
"""Op results by (op entry, attrs, operand struct infos), each entry holding what its key's
ids name, so no id is reused while the entry lives."""
_INFERRED_LIMIT = 8192


def _op_struct_info(call: Call, info: OpInfo) -> StructInfo:
    """`info.infer(call)`, remembered for calls whose operands are vars (or tuples of vars).

    An op's inference sees a var only through its struct info, so alike struct infos (the
    same objects, as a traced layer's experts share them, or static tensors of one dtype and
    shape, as a model's layers have) give the same result: tracing and lowering a model's
    worth of alike calls infers each kind once. Failures are never remembered.
    """
    if call.sinfo_args:
        return info.infer(call)
    keep: list[object] = [info]
    operands = _operand_key(call.args, keep)
    attrs = _attrs_key(call.attrs)
    if operands is None or attrs is None:
        return info.infer(call)
    key = (id(info), attrs, operands)
    found = _INFERRED.get(key)
    if found is not None:
        return found[0]
    sinfo = info.infer(call)
    if len(_INFERRED) >= _INFERRED_LIMIT:
        _INFERRED.clear()
    _INFERRED[key] = (sinfo, tuple(keep))
    return sinfo


def _attrs_key(attrs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...] | None:
    """The attrs as a key, None unless every value is None, a str, an int, a tuple of ints or
    a tuple of `IntImm`s of int values (exactly those types: True and 1.0 equal 1 as keys but
    not to an op's normaliser or printer). A tuple of IntImms, as a reshape's normalised
    shape, is keyed by its values and dtypes."""
    items: list[tuple[str, Hashable]] = []
    for name, value in attrs.items():
        if value is None or type(value) is str or type(value) is int:
            items.append((name, value))
            continue
        if type(value) is tuple:
            if all(type(v) is int for v in value):
                items.append((name, value))
                continue
            dims = _dims_key(value)
            if dims is not None:
                items.append((name, ("dims", dims)))
                continue
        return None
    return tuple(items)


def _dims_key(dims: tuple[object, ...]) -> tuple[tuple[int, str], ...] | None:
    """`(value, dtype)` of each dim, None unless every one is an `IntImm` of an int value."""
    key = []
    for d in dims:
        if type(d) is not IntImm or type(d.value) is not int:
            return None
        key.append((d.value, d.imm_dtype))
    return tuple(key)


def _operand_key(args: tuple[Expr, ...], keep: list[object]) -> tuple[Hashable, ...] | None:
    """The keys of the operands' struct infos (`_sinfo_key`), None unless every operand is a
    var with struct info or a tuple of such."""
    key: list[Hashable] = []
    for arg in args:
        if type(arg) is Tuple:
            fields = _operand_key(arg.fields, keep)
            if fields is None:
                return None
            key.append(fields)
            continue
        if not isinstance(arg, Var) or arg.struct_info is None:
            return None
        key.append(_sinfo_key(arg.struct_info, keep))
    return tuple(key)


def _sinfo_key(sinfo: StructInfo, keep: list[object]) -> Hashable:
    """A static tensor's (or an object's) struct info by value: weights of one shape are
    separate objects, alike in all an inference reads; the dims must be IntImms of exactly
    int values (True equals 1 but is not spelt as 1). Any other struct info by its id (kept)."""
    kind = type(sinfo)
    if kind is TensorStructInfo:
        assert isinstance(sinfo, TensorStructInfo)
        dims = None if sinfo.shape is None else _dims_key(sinfo.shape)
        if sinfo.shape is None or dims is not None:
            return ("tensor", sinfo.dtype, sinfo.ndim, dims)
    elif kind is ObjectStructInfo:
        return "object"
    keep.append(sinfo)
    return id(sinfo)


def _tuple_field(item: TupleGetItem) -> StructInfo:
    sinfo = struct_info_of(item.tuple_value)
    if isinstance(sinfo, ObjectStructInfo):
        return ObjectStructInfo()
    if not isinstance(sinfo, TupleStructInfo):
        raise StructInfoError(
            f"indexing [{item.index}] needs a tuple; expected R.Tuple, got {describe(sinfo)}"
        )
    if not 0 <= item.index < len(sinfo.fields):
        raise StructInfoError(
            f"tuple index {item.index} out of range: expected 0 <= index < {len(sinfo.fields)}, "
            f"got {item.index}"
        )
    return sinfo.fields[item.index]


def is_pure_call(call: Call) -> bool:
    """Whether a call has no side effects: ops by their registry flag, externs never."""
    if isinstance(call.op, Op):
        return op_info(call.op).pure
    if isinstance(call.op, ExternFunc):
        return False
    callee = struct_info_of(call.op)
    return callee.purity if isinstance(callee, FuncStructInfo) else False
