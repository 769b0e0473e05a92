"""The TIR subset `tir.eval` runs: numpy tables of its operations and the checker for the rest.

Checking happens when a PrimFunc is compiled (the VM compiles every PrimFunc when it loads a
module), so an unsupported kernel fails before any data is touched. Imports `ir` and `tir` only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.dtype import is_int, to_numpy
from lazyparams.ir.prim import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Intrinsic,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimVar,
    Select,
    Sub,
    operands,
)
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    PrimFunc,
    SeqStmt,
    Stmt,
)

Array = np.ndarray[Any, Any]

BINARY_UFUNCS: dict[type[BinaryOp], Callable[[Any, Any], Any]] = {
    Add: np.add,
    Sub: np.subtract,
    Mul: np.multiply,
    FloorDiv: np.floor_divide,
    FloorMod: np.mod,
    Min: np.minimum,
    Max: np.maximum,
    EQ: np.equal,
    NE: np.not_equal,
    LT: np.less,
    LE: np.less_equal,
    GT: np.greater,
    GE: np.greater_equal,
    And: np.logical_and,
    Or: np.logical_or,
}


def _rsqrt(x: Array) -> Array:
    return np.asarray(1 / np.sqrt(x))


def _sigmoid(x: Array) -> Array:
    return np.asarray(1 / (1 + np.exp(-x)))


INTRINSIC_KERNELS: dict[str, Callable[[Array], Array]] = {
    "abs": np.abs,
    "round": np.rint,  # round half to even, as the quantization formats require
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
}
"""numpy implementations of the TIR math intrinsics (`T.round` rounds half to even)."""


def divide(x: Any, y: Any, dtype: str) -> Any:
    """TIR's `/`: true division for floats, division truncated toward zero for integers."""
    if not is_int(dtype):
        return np.true_divide(x, y)
    quotient = np.floor_divide(np.abs(x), np.abs(y))
    return np.where((np.asarray(x) < 0) != (np.asarray(y) < 0), -quotient, quotient)


def cast(x: Any, dtype: str) -> Any:
    """`x` as an array of `dtype` (copied only when the dtype changes)."""
    target = to_numpy(dtype)
    arr = np.asarray(x)
    return arr if arr.dtype == target else arr.astype(target)


def fit(x: Any, dtype: str) -> Any:
    """Bring an operation's result to the expression's dtype; wide integers stay int64."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu" and is_int(dtype) and to_numpy(dtype).itemsize >= 4:
        return arr
    return cast(arr, dtype)


# Checking -------------------------------------------------------------------------------------

REDUCERS: dict[type[BinaryOp], np.ufunc] = {
    Add: np.add,
    Mul: np.multiply,
    Min: np.minimum,
    Max: np.maximum,
}


def reduction_of(block: Block) -> tuple[BufferStore, np.ufunc, PrimExpr] | None:
    """A reduction block's store, combining ufunc and per-iteration contribution.

    None for a block without reduce iterators. A reduction body must read
    `out[idx] = out[idx] <op> expr` (either operand order) with op `+`, `*`, `T.max`, `T.min`.
    """
    if not any(iv.kind == "R" for iv in block.iter_vars):
        return None
    body, value = block.body, getattr(block.body, "value", None)
    if isinstance(body, BufferStore) and type(value) in REDUCERS:
        assert isinstance(value, BinaryOp)
        for acc, other in ((value.a, value.b), (value.b, value.a)):
            if is_load_of(acc, body) and not _reads(other, body.buffer):
                return body, REDUCERS[type(value)], other
    raise RuntimeExecError(
        f"reduction block {block.name!r}: expected a body out[i] = out[i] + expr (or *, T.max, "
        f"T.min) where expr does not read out, got {type(body).__name__}"
    )


def is_load_of(e: PrimExpr, store: BufferStore) -> bool:
    return isinstance(e, BufferLoad) and e.buffer is store.buffer and e.indices == store.indices


def _loads(e: PrimExpr) -> list[BufferLoad]:
    found = [e] if isinstance(e, BufferLoad) else []
    for child in operands(e):
        found += _loads(child)
    return found


def _reads(e: PrimExpr, buffer: Buffer) -> bool:
    return any(load.buffer is buffer for load in _loads(e))


def accesses(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """Buffers a statement reads and writes."""
    reads: set[Buffer] = set()
    writes: set[Buffer] = set()
    exprs, stmts = _parts(s)
    for e in exprs:
        reads |= {load.buffer for load in _loads(e)}
    if isinstance(s, BufferStore):
        writes.add(s.buffer)
    for inner in stmts:
        r, w = accesses(inner)
        reads, writes = reads | r, writes | w
    return reads, writes


def _parts(s: Stmt) -> tuple[list[PrimExpr], list[Stmt]]:
    """The expressions and sub-statements of one statement."""
    if isinstance(s, SeqStmt):
        return [], list(s.stmts)
    if isinstance(s, For):
        return [s.min, s.extent], [s.body]
    if isinstance(s, IfThenElse):
        return [s.condition], [s.then_case] + ([] if s.else_case is None else [s.else_case])
    if isinstance(s, Block):
        return [iv.value for iv in s.iter_vars], [s.body] + ([] if s.init is None else [s.init])
    if isinstance(s, BufferStore):
        return [s.value, *s.indices], []
    return [], []


_EXPRS = (IntImm, FloatImm, PrimVar, BufferLoad, Not, Cast, Select, Intrinsic)


class Checker:
    """Refuses, with the place and the reason, anything outside the vectorisable subset."""

    def __init__(self, func: PrimFunc, name: str) -> None:
        self.name, self.params = name, set(func.buffers)
        dims = {d for b in func.buffers for d in b.shape if isinstance(d, PrimVar)}
        self.symbols = frozenset(dims | {p for p in func.params if isinstance(p, PrimVar)})

    def fail(self, where: str, message: str) -> None:
        raise RuntimeExecError(f"PrimFunc {self.name}: {where}: {message}")

    def stmt(self, s: Stmt, bound: frozenset[PrimVar], in_loop: bool, where: str) -> None:
        if isinstance(s, For):
            for e in (s.min, s.extent):
                self.expr(e, self.symbols, f"{where}: bounds of loop {s.loop_var.name}")
            self.stmt(s.body, bound | {s.loop_var}, True, f"{where}: loop {s.loop_var.name}")
        elif isinstance(s, Block):
            self.block(s, bound, in_loop, f"{where}: block {s.name!r}")
        elif isinstance(s, SeqStmt | IfThenElse):
            self.branches(s, bound, in_loop, where)
        elif isinstance(s, BufferStore):
            self.store(s, bound, in_loop, where)
        else:
            self.fail(where, f"expected a loop, block, if, store or statement list, got {s!r}")

    def branches(
        self, s: SeqStmt | IfThenElse, bound: frozenset[PrimVar], in_loop: bool, where: str
    ) -> None:
        exprs, stmts = _parts(s)
        for e in exprs:
            self.expr(e, bound, where)
        for inner in stmts:
            self.stmt(inner, bound, in_loop, where)
        if in_loop:
            self.independent(stmts, isinstance(s, IfThenElse), where)

    def independent(self, stmts: list[Stmt], exclusive: bool, where: str) -> None:
        """Statements inside a loop run each over the whole domain, so none may see another."""
        access = [accesses(s) for s in stmts]
        for i, (_, writes) in enumerate(access):
            for j, (reads, other_writes) in enumerate(access):
                shared = writes & (reads if exclusive else reads | other_writes)
                if i != j and shared:
                    names = ", ".join(sorted(b.name for b in shared))
                    self.fail(
                        where,
                        "expected independent statements inside a loop, got "
                        f"statement {j} touching {names} written by statement {i} "
                        "(write each dependent step as its own loop nest)",
                    )

    def block(self, b: Block, bound: frozenset[PrimVar], in_loop: bool, where: str) -> None:
        for iv in b.iter_vars:
            self.expr(iv.extent, self.symbols, f"{where}: extent of {iv.var.name}")
            self.expr(iv.value, bound, f"{where}: binding of {iv.var.name}")
        inner = bound | {iv.var for iv in b.iter_vars}
        if b.init is not None:
            spatial = inner - {iv.var for iv in b.iter_vars if iv.kind == "R"}
            self.stmt(b.init, frozenset(spatial), in_loop, f"{where}: init")
        try:
            reduction_of(b)
        except RuntimeExecError as err:
            self.fail(where, str(err))
        self.stmt(b.body, inner, in_loop, where)

    def store(self, s: BufferStore, bound: frozenset[PrimVar], in_loop: bool, where: str) -> None:
        self.buffer(s.buffer, s.indices, where)
        for e in (s.value, *s.indices):
            self.expr(e, bound, where)
        if in_loop and any(
            not is_load_of(ld, s) for ld in _loads(s.value) if ld.buffer is s.buffer
        ):
            self.fail(
                where,
                f"store to {s.buffer.name} reads {s.buffer.name} elsewhere; expected "
                "a loop body that reads what it writes only at the written indices",
            )

    def buffer(self, buf: Buffer, indices: tuple[PrimExpr, ...], where: str) -> None:
        if buf not in self.params:
            self.fail(where, f"expected buffers among the parameters, got {buf.name}")
        if len(indices) != len(buf.shape):
            self.fail(
                where,
                f"{buf.name} has {len(buf.shape)} dims, got {len(indices)} indices; "
                "expected one index per dim",
            )

    def expr(self, e: PrimExpr, bound: frozenset[PrimVar], where: str) -> None:
        if isinstance(e, PrimVar) and e not in bound and e not in self.symbols:
            self.fail(
                where, f"expected a var of an enclosing loop, block or buffer shape, got {e.name}"
            )
        if not isinstance(e, _EXPRS) and type(e) not in BINARY_UFUNCS and not isinstance(e, Div):
            self.fail(
                where,
                f"expected arithmetic, a comparison, a cast, T.if_then_else, a load "
                f"or an intrinsic, got {type(e).__name__}",
            )
        if isinstance(e, Intrinsic) and (e.name not in INTRINSIC_KERNELS or len(e.args) != 1):
            self.fail(
                where,
                f"expected an intrinsic among {', '.join(INTRINSIC_KERNELS)} with "
                f"one argument, got T.{e.name} with {len(e.args)}",
            )
        if isinstance(e, BufferLoad):
            self.buffer(e.buffer, e.indices, where)
        for child in operands(e):
            self.expr(child, bound, where)
