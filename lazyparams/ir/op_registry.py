"""The operator registry: op name -> signature, struct-info inference and purity.

Ops are data: the `op` layer registers each one here, and the IR, printer, parser, passes and
VM look them up by name. Imports the other `ir` modules only (the `op` layer, by name, the first
time a lookup misses).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lazyparams.errors import StructInfoError
from lazyparams.ir.expr import Call, Op
from lazyparams.ir.struct_info import StructInfo

InferFn = Callable[[Call], StructInfo]


@dataclass(frozen=True, slots=True)
class OpParam:
    """One parameter of an op's script spelling.

    `kind` "expr" is a Relax operand (stored in `Call.args`); "attr" is a static value (stored in
    `Call.attrs`: ints, lists of ints, dtype strings, prim expressions). An attr with
    `required=False` may be left out and then takes `default`.
    """

    name: str
    kind: Literal["expr", "attr"]
    required: bool = True
    default: object = None


@dataclass(frozen=True, slots=True)
class OpInfo:
    """What the registry knows of one op; `name` is its script spelling after `R.`."""

    name: str
    params: tuple[OpParam, ...]
    infer: InferFn
    pure: bool = True


_INFOS: dict[str, OpInfo] = {}
_OPS: dict[str, Op] = {}


def register_op(info: OpInfo) -> Op:
    """Register an op (again: the newer entry wins) and return its unique `Op` node."""
    _INFOS[info.name] = info
    return _OPS.setdefault(info.name, Op(info.name))


def _register_builtin_ops() -> None:
    """Load the `op` layer, which registers every built-in op; the IR sits below it, so it is
    named here rather than imported, and loaded only once a lookup needs it."""
    importlib.import_module("lazyparams.op")


def get_op(name: str) -> Op:
    """The unique `Op` node of a registered op, or raise naming the unknown op."""
    if name not in _OPS:
        _register_builtin_ops()
    if name not in _OPS:
        raise _unknown(name)
    return _OPS[name]


def op_info(op: Op | str) -> OpInfo:
    """The registry entry of an op, by node or by name."""
    name = op if isinstance(op, str) else op.name
    if name not in _INFOS:
        _register_builtin_ops()
    if name not in _INFOS:
        raise _unknown(name)
    return _INFOS[name]


def _unknown(name: str) -> StructInfoError:
    ops = ", ".join(f"R.{n}" for n in sorted(_INFOS)) or "none"
    return StructInfoError(f"unknown op R.{name}; expected one of {ops}")


def registered_ops() -> list[str]:
    """Names of every registered op, sorted."""
    _register_builtin_ops()
    return sorted(_INFOS)
