"""The TIR subset: buffers, loads and stores, loops, blocks and PrimFuncs.

Enough to write layout transforms, element-wise kernels, reductions and quantization kernels
in destination-passing style. Scalar expressions come from `ir.prim`. Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lazyparams.ir.dtype import canonical_dtype
from lazyparams.ir.expr import BaseFunc
from lazyparams.ir.prim import PrimExpr, PrimVar


@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """A multi-dimensional array a PrimFunc reads or writes; compares by identity."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    def __repr__(self) -> str:
        return f"Buffer({self.name!r})"


@dataclass(frozen=True, slots=True)
class BufferLoad(PrimExpr):
    """`buf[i, j]` read as a scalar."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


@dataclass(frozen=True, slots=True)
class Range:
    """The half-open interval [min, min + extent)."""

    min: PrimExpr
    extent: PrimExpr


@dataclass(frozen=True, slots=True)
class BufferRegion:
    """The part of a buffer a block reads or writes (`T.reads(A[i, 0:16])`)."""

    buffer: Buffer
    region: tuple[Range, ...]


class Stmt:
    """Base of TIR statements."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BufferStore(Stmt):
    """`buf[i, j] = value`."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """`for var in range(min, min + extent)`; `T.grid` is a nest of these."""

    loop_var: PrimVar
    min: PrimExpr
    extent: PrimExpr
    body: Stmt
    kind: Literal["serial", "parallel", "vectorized", "unrolled"] = "serial"


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    """`if cond: then_case else: else_case` inside a kernel body."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True)
class IterVar:
    """A block iterator: spatial ("S") or reduce ("R") over [0, extent), bound to `value`."""

    var: PrimVar
    extent: PrimExpr
    kind: Literal["S", "R"]
    value: PrimExpr


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    """`with T.block(name):` with its iterators, declared accesses, optional init and body."""

    name: str
    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    body: Stmt
    init: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False)
class PrimFunc(BaseFunc):
    """A TIR function over buffers, called from Relax by `R.call_tir` (outputs last); a
    PrimVar param is a scalar (`n: T.int64`), passed as an `R.prim_value`."""

    params: tuple[Buffer | PrimVar, ...]
    body: Stmt
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """The buffer params, without the scalar ones."""
        return tuple(p for p in self.params if isinstance(p, Buffer))
