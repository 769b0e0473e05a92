"""The read and write regions of a block, inferred from its body when the script omits them.

As TVMScript does for a block without `T.reads` / `T.writes`: every buffer access in the body
(and `T.init`) counts, per buffer the union of its indices as ranges, buffers in order of first
access; a loop inside the block widens an index over the loop's range; with an init, a buffer
the block writes is not listed among its reads. Indices are compared as affine forms (sums of
vars times ints plus an int); accesses whose union that cannot express are refused, naming the
block and buffer. Imports `ir` and `tir.nodes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from lazyparams.errors import ParseError
from lazyparams.ir.prim import Add, IntImm, Mul, PrimExpr, PrimVar, Sub, operands
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    Range,
    SeqStmt,
    Stmt,
)

Affine = tuple[tuple[tuple[PrimVar, int], ...], int]
"""An index as ((var, coefficient), ...) sorted by var name, plus a constant."""


@dataclass(slots=True)
class _Span:
    """The accesses of one buffer dim so far: the first index seen, and the affine bounds."""

    first: PrimExpr
    terms: tuple[tuple[PrimVar, int], ...]
    low: int
    high: int
    point: bool


def infer_regions(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """The (reads, writes) of `block`, from the accesses of its body and init."""
    reads: dict[Buffer, list[_Span]] = {}
    writes: dict[Buffer, list[_Span]] = {}
    for kind, access, loops in _accesses(block.body if block.init is None else _seq(block)):
        table = writes if kind == "write" else reads
        spans = [_span(i, loops, block, access.buffer) for i in access.indices]
        _merge(table, access.buffer, spans, block)
    if block.init is not None:
        reads = {b: s for b, s in reads.items() if b not in writes}
    return _regions(reads), _regions(writes)


def _seq(block: Block) -> Stmt:
    assert block.init is not None
    return SeqStmt((block.init, block.body))


def _accesses(
    stmt: Stmt, loops: dict[PrimVar, For] | None = None
) -> Iterator[tuple[str, BufferLoad | BufferStore, dict[PrimVar, For]]]:
    """("read" | "write", access, enclosing loops) in visiting order (a store before its
    value's loads, as TVM's detector visits them)."""
    loops = loops or {}
    if isinstance(stmt, BufferStore):
        yield "write", stmt, loops
        for expr in (*stmt.indices, stmt.value):
            yield from (("read", load, loops) for load in _loads(expr))
    elif isinstance(stmt, SeqStmt):
        for part in stmt.stmts:
            yield from _accesses(part, loops)
    elif isinstance(stmt, For):
        yield from _accesses(stmt.body, {**loops, stmt.loop_var: stmt})
    elif isinstance(stmt, IfThenElse):
        yield from (("read", load, loops) for load in _loads(stmt.condition))
        yield from _accesses(stmt.then_case, loops)
        if stmt.else_case is not None:
            yield from _accesses(stmt.else_case, loops)
    elif isinstance(stmt, Block):
        raise ParseError(
            f"block {stmt.name!r}: cannot infer the regions of a block nested in another; "
            "expected T.reads(...) and T.writes(...) on the outer block"
        )


def _loads(expr: PrimExpr) -> Iterator[BufferLoad]:
    """The buffer loads inside `expr`, outermost first (a load's indices after the load)."""
    if isinstance(expr, BufferLoad):
        yield expr
    for part in operands(expr):
        yield from _loads(part)


def _span(index: PrimExpr, loops: dict[PrimVar, For], block: Block, buffer: Buffer) -> _Span:
    """One index as a span: its affine bounds with the inner loops' vars ranging."""
    form = _affine(index)
    if form is None:
        raise _refused(block, buffer, f"index {index} is not affine")
    low = high = form[1]
    terms = []
    point = True
    for var, coefficient in form[0]:
        loop = loops.get(var)
        if loop is None:
            terms.append((var, coefficient))
            continue
        lo, extent = loop.min, loop.extent
        if not (isinstance(lo, IntImm) and isinstance(extent, IntImm)):
            raise _refused(block, buffer, f"the loop over {var.name} has a symbolic range")
        ends = (coefficient * lo.value, coefficient * (lo.value + extent.value - 1))
        low, high = low + min(ends), high + max(ends)
        point = point and extent.value == 1
    return _Span(index, tuple(terms), low, high, point)


def _affine(expr: PrimExpr) -> Affine | None:
    """`expr` as an affine form over its vars, or None when it is not one."""
    if isinstance(expr, IntImm):
        return (), expr.value
    if isinstance(expr, PrimVar):
        return ((expr, 1),), 0
    if isinstance(expr, Add | Sub):
        a, b = _affine(expr.a), _affine(expr.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        return _combine(a, b, sign)
    if isinstance(expr, Mul):
        a, b = _affine(expr.a), _affine(expr.b)
        if a is None or b is None or (a[0] and b[0]):
            return None
        (terms, const), scale = (a, b[1]) if not b[0] else (b, a[1])
        return tuple((v, c * scale) for v, c in terms if c * scale), const * scale
    return None


def _combine(a: Affine, b: Affine, sign: int) -> Affine:
    coefficients: dict[PrimVar, int] = dict(a[0])
    for var, c in b[0]:
        coefficients[var] = coefficients.get(var, 0) + sign * c
    terms = tuple(sorted(((v, c) for v, c in coefficients.items() if c), key=_var_key))
    return terms, a[1] + sign * b[1]


def _var_key(term: tuple[PrimVar, int]) -> tuple[str, int]:
    return term[0].name, id(term[0])


def _merge(
    table: dict[Buffer, list[_Span]], buffer: Buffer, spans: list[_Span], block: Block
) -> None:
    """Union `spans` into the buffer's entry of `table`."""
    known = table.get(buffer)
    if known is None:
        table[buffer] = spans
        return
    for dim, (old, new) in enumerate(zip(known, spans, strict=True)):
        if old.terms != new.terms:
            raise _refused(block, buffer, f"dim {dim} is indexed by {old.first} and {new.first}")
        same = old.point and new.point and (old.low, old.high) == (new.low, new.high)
        old.point = same
        old.low, old.high = min(old.low, new.low), max(old.high, new.high)


def _regions(table: dict[Buffer, list[_Span]]) -> tuple[BufferRegion, ...]:
    return tuple(
        BufferRegion(buffer, tuple(_range(s) for s in spans)) for buffer, spans in table.items()
    )


def _range(span: _Span) -> Range:
    """A point keeps its index as written; a widened span starts at its lowest index."""
    if span.point:
        return Range(span.first, IntImm(1))
    start: PrimExpr = IntImm(span.low)
    for var, coefficient in reversed(span.terms):
        term = var if coefficient == 1 else Mul(var, IntImm(coefficient))
        start = term if start == IntImm(0) else Add(term, start)
    return Range(start, IntImm(span.high - span.low + 1))


def _refused(block: Block, buffer: Buffer, why: str) -> ParseError:
    return ParseError(
        f"block {block.name!r}: cannot infer the region of buffer {buffer.name} ({why}); "
        "expected T.reads(...) and T.writes(...) written out"
    )
