"""Small helpers shared by the passes: building the extern calls they emit, recognising calls
again, selecting functions, and the symbolic dims an expression or struct info mentions.

Imports `ir` only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from lazyparams.errors import TransformError
from lazyparams.ir import (
    Binding,
    BindingBlock,
    Call,
    Expr,
    ExternFunc,
    FuncStructInfo,
    Function,
    IRModule,
    ObjectStructInfo,
    Op,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar

CALLBACK_SINFO = FuncStructInfo(
    (PrimStructInfo("int64"), ObjectStructInfo()), ObjectStructInfo(), False
)
"""`R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False)`: fget_param / fset_output."""


def is_op_call(expr: Expr, name: str) -> bool:
    """Whether `expr` calls the registered op `name`."""
    return isinstance(expr, Call) and isinstance(expr.op, Op) and expr.op.name == name


def packed_call(callee: Expr, args: Sequence[Expr]) -> Call:
    """A call returning an opaque object: `R.call_packed(name, ...)` or a callback var call."""
    sinfo_args = (ObjectStructInfo(),) if isinstance(callee, ExternFunc) else ()
    return Call(callee, tuple(args), {}, sinfo_args)


HANDOFF = ("set_item", "fset_output")
"""Callees that take ownership of what they are given, as the VM counts them by default."""


def is_handoff(expr: Expr, handoff: Collection[str]) -> bool:
    """Whether `expr` calls a hand-off callee: an extern or callback param named in `handoff`.

    What a hand-off is given belongs to the sink from then on; what it returns is a receipt,
    not a buffer of the function.
    """
    if not isinstance(expr, Call):
        return False
    if isinstance(expr.op, ExternFunc):
        return expr.op.global_symbol in handoff
    return isinstance(expr.op, Var) and expr.op.name_hint in handoff


def func_names_arg(func_names: Sequence[str] | None, pass_name: str) -> tuple[str, ...] | None:
    """A pass's `func_names` argument checked and frozen: None, or a list of names (a lone
    string is refused, so that "main" does not select functions "m", "a", "i", "n")."""
    if func_names is None:
        return None
    if isinstance(func_names, str) or not all(isinstance(n, str) for n in func_names):
        raise TransformError(
            f"{pass_name}: expected func_names to be a list of names, got {func_names!r}"
        )
    return tuple(func_names)


def select_functions(mod: IRModule, names: Sequence[str] | None, pass_name: str) -> list[str]:
    """The Relax functions a lazy pass rewrites: those named in `names`, or by default every
    function whose name ends with `transform_params`."""
    if names is None:
        return [n for n, _ in mod.relax_functions() if n.endswith("transform_params")]
    for name in names:
        if name not in mod:
            raise TransformError(
                f"{pass_name}: expected a function named {name!r}, got a module of {mod.names()}"
            )
        if not isinstance(mod[name], Function):
            kind = type(mod[name]).__name__
            raise TransformError(
                f"{pass_name}: expected {name!r} to be a Relax function, got a {kind}"
            )
    return list(names)


def num_input(func: Function, name: str, pass_name: str) -> int:
    """The function's `num_input` attr (0 when absent), checked against its params."""
    value = func.attrs.get("num_input", 0)
    value = getattr(value, "value", value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= len(func.params):
        raise TransformError(
            f"{pass_name}: function {name!r}: expected num_input between 0 and "
            f"{len(func.params)}, got {value!r}"
        )
    return value


# Symbolic dims ------------------------------------------------------------------------------


def prim_vars(obj: Any) -> list[PrimVar]:
    """The symbolic vars `obj` mentions (a prim expr, struct info, Relax expr or attr value),
    in order of first appearance; the struct info of Relax vars it reads is not entered."""
    found: dict[PrimVar, None] = {}
    _collect_prim_vars(obj, found)
    return list(found)


# how `_collect_prim_vars` walks a value of each type, decided once per type
_VAR, _LEAF, _NODE, _MAPPING, _SEQUENCE = range(5)
_WALK_OF: dict[type, tuple[int, tuple[str, ...]]] = {}


def _walk_of(cls: type) -> tuple[int, tuple[str, ...]]:
    """How to walk a value of type `cls`, with the fields to enter for a node."""
    if issubclass(cls, PrimVar):
        return _VAR, ()
    if issubclass(cls, Var | Op | ExternFunc | IntImm | str | int | float | bool | type(None)):
        return _LEAF, ()  # an IntImm (most dims) holds no var: skip walking its fields
    if issubclass(cls, PrimExpr | StructInfo | Expr | Binding | BindingBlock) and (
        dataclasses.is_dataclass(cls)
    ):  # bindings and blocks: those of an If's branches
        return _NODE, tuple(f.name for f in dataclasses.fields(cls))
    if issubclass(cls, dict):
        return _MAPPING, ()
    return (_SEQUENCE if issubclass(cls, tuple | list) else _LEAF), ()


def _collect_prim_vars(obj: Any, found: dict[PrimVar, None]) -> None:
    cls = type(obj)
    walk = _WALK_OF.get(cls)
    if walk is None:
        walk = _WALK_OF[cls] = _walk_of(cls)
    kind, names = walk
    if kind == _VAR:
        found[obj] = None
    elif kind == _NODE:
        for name in names:
            _collect_prim_vars(getattr(obj, name), found)
    elif kind == _MAPPING:
        for value in obj.values():
            _collect_prim_vars(value, found)
    elif kind == _SEQUENCE:
        for item in obj:
            _collect_prim_vars(item, found)


def definable_prim_vars(sinfos: Iterable[StructInfo | None]) -> list[PrimVar]:
    """The symbolic vars a value of one of `sinfos` defines when matched: those standing alone
    as a tensor dim, a shape value or a prim value (`m * n` uses m and n, defines neither)."""
    found: dict[PrimVar, None] = {}
    for sinfo in sinfos:
        if isinstance(sinfo, TensorStructInfo):
            dims: tuple[PrimExpr, ...] = sinfo.shape or ()
        elif isinstance(sinfo, ShapeStructInfo):
            dims = sinfo.values or ()
        elif isinstance(sinfo, PrimStructInfo):
            dims = (sinfo.value,) if sinfo.value is not None else ()
        elif isinstance(sinfo, TupleStructInfo):
            dims = tuple(definable_prim_vars(sinfo.fields))
        else:
            dims = ()
        found.update(dict.fromkeys(d for d in dims if isinstance(d, PrimVar)))
    return list(found)


def erase_dims(sinfo: StructInfo, keep: Iterable[PrimVar]) -> StructInfo:
    """`sinfo` with the shape of every tensor that mentions a dim outside `keep` reduced to its
    rank, so the struct info refers only to dims defined where it is used."""
    kept = set(keep)
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        if all(v in kept for v in prim_vars(sinfo.shape)):
            return sinfo
        return TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(tuple(erase_dims(f, kept) for f in sinfo.fields))
    return sinfo
