"""The operator registry: op name -> signature, struct-info inference and purity.

Ops are data: the `op` layer registers each one here, and the IR, printer, parser, passes and
VM look them up by name. Code that looks an op up by name imports `lazyparams.op` itself (an `Op`
node exists only once registered). Imports the other `ir` modules only.
"""

from __future__ import annotations

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

SINFO_ARG_KEYWORDS: dict[str, str] = {"call_tir": "out_sinfo"}
"""Ops whose script spelling has a keyword stored in `Call.sinfo_args` rather than in attrs."""


def register_op(info: OpInfo) -> Op:
    """Register an op (again: the newer entry wins) and return its unique `Op` node."""
    _INFOS[info.name] = info
    return _OPS.setdefault(info.name, Op(info.name))


def get_op(name: str) -> Op:
    """The unique `Op` node of a registered op, or raise naming the unknown op."""
    if name not in _OPS:
        raise _unknown(name)
    return _OPS[name]


def op_info(op: Op | str) -> OpInfo:
    """The registry entry of an op, by node or by name."""
    name = op if isinstance(op, str) else op.name
    if name not in _INFOS:
        raise _unknown(name)
    return _INFOS[name]


def _unknown(name: str) -> StructInfoError:
    if not _INFOS:  # the IR registers nothing itself: the op layer does, once imported
        return StructInfoError(f"unknown op R.{name}; no op is registered: import lazyparams.op")
    ops = ", ".join(f"R.{n}" for n in sorted(_INFOS))
    return StructInfoError(f"unknown op R.{name}; expected one of {ops}")


def registered_ops() -> list[str]:
    """Names of every registered op, sorted."""
    return sorted(_INFOS)
