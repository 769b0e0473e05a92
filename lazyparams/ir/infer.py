"""Struct info of any Relax expression: stored on vars, derived for everything else.

Calls to ops use the op registry's inference; calls to externs and functions use their declared
`sinfo_args`. Imports the other `ir` modules only.
"""

from __future__ import annotations

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
from lazyparams.ir.op_registry import op_info
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
        return op_info(call.op).infer(call)
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    if call.sinfo_args:
        return TupleStructInfo(call.sinfo_args)
    callee = struct_info_of(call.op)
    return callee.ret if isinstance(callee, FuncStructInfo) else ObjectStructInfo()


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
