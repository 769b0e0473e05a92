"""Vectorised numpy evaluation of PrimFuncs: each statement runs over its whole loop domain.

Loop nests become numpy index grids; affine buffer accesses become strided views, any other
access fancy indexing; reduction blocks become numpy reductions. `compile_prim_func` checks the
supported subset first (`tir.kernel`), so nothing outside it fails midway. Imports `ir` and
`tir` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.dtype import to_numpy
from lazyparams.ir.prim import (
    Add,
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
    PrimExpr,
    PrimVar,
    Select,
    Sub,
)
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    SeqStmt,
    Stmt,
)
from lazyparams.tir.subset import (
    BINARY_UFUNCS,
    INTRINSIC_KERNELS,
    Array,
    cast,
    divide,
    fit,
    reduction_of,
)

Val = Any
"""An evaluated scalar expression: an `_Affine` index, a numpy array or a numpy scalar."""


@dataclass(frozen=True, slots=True)
class _Affine:
    """The integer `const + sum(coeffs[k] * axis_k)` over the axes of the loop domain."""

    coeffs: tuple[int, ...]
    const: int

    def is_const(self) -> bool:
        return not any(self.coeffs)


@dataclass(slots=True)
class _Scope:
    """What encloses a statement: loops (var, min, extent), block iter vars and conditions."""

    loops: tuple[tuple[PrimVar, int, int], ...] = ()
    iters: Mapping[PrimVar, PrimExpr] = field(default_factory=dict)
    guards: tuple[PrimExpr, ...] = ()


class _Leaf:
    """Evaluates the expressions of one statement over the domain of its enclosing loops."""

    def __init__(self, run: _Run, scope: _Scope) -> None:
        self.run, self.scope = run, scope
        self.extents = tuple(extent for _, _, extent in scope.loops)
        self.axis = {var: k for k, (var, _, _) in enumerate(scope.loops)}
        self.guarded = bool(scope.guards)
        self._iter_values: dict[PrimVar, Val] = {}

    # Expressions -----------------------------------------------------------------------------

    def value(self, e: PrimExpr) -> Val:
        """`e` over the domain: an `_Affine` while it stays an affine integer, else an array."""
        if isinstance(e, IntImm):
            return np.bool_(e.value) if e.dtype == "bool" else self._const(e.value)
        if isinstance(e, FloatImm):
            return to_numpy(e.dtype).type(e.value)
        if isinstance(e, PrimVar):
            return self._var(e)
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, BinaryOp):
            return self._binary(e)
        if isinstance(e, Not):
            return np.logical_not(self.array(e.a))
        if isinstance(e, Cast):
            return cast(self.array(e.value), e.dtype)
        if isinstance(e, Select):
            return self._select(e)
        if isinstance(e, Intrinsic):
            return fit(INTRINSIC_KERNELS[e.name](self.array(e.args[0])), e.dtype)
        raise RuntimeExecError(
            f"cannot evaluate {type(e).__name__} in a kernel; expected a node of the checked subset"
        )

    def array(self, e: PrimExpr) -> Val:
        """`e` as a numpy array or scalar (affine indices materialised)."""
        return self.materialise(self.value(e))

    def mask(self) -> Array | None:
        """Where every enclosing condition holds, or None when there is no condition."""
        result: Array | None = None
        for guard in self.scope.guards:
            cond = np.asarray(self.array(guard), dtype=bool)
            result = cond if result is None else np.logical_and(result, cond)
        return result

    def _const(self, value: int) -> _Affine:
        return _Affine((0,) * len(self.extents), int(value))

    def _var(self, var: PrimVar) -> Val:
        if var in self.axis:
            k = self.axis[var]
            coeffs = tuple(int(i == k) for i in range(len(self.extents)))
            return _Affine(coeffs, self.scope.loops[k][1])
        if var in self.scope.iters:
            if var not in self._iter_values:
                self._iter_values[var] = self.value(self.scope.iters[var])
            return self._iter_values[var]
        if var not in self.run.symbols:
            raise RuntimeExecError(
                f"var {var.name} has no value; expected a symbolic dim bound by a parameter or "
                "match_cast, or a var of an enclosing loop or block"
            )
        return self._const(self.run.symbols[var])

    def _binary(self, e: BinaryOp) -> Val:
        a, b = self.value(e.a), self.value(e.b)
        if isinstance(a, _Affine) and isinstance(b, _Affine):
            affine = _affine_binary(e, a, b)
            if affine is not None:
                return affine
        x, y = self.materialise(a), self.materialise(b)
        if isinstance(e, Div):
            return fit(divide(x, y, e.dtype), e.dtype)
        return fit(BINARY_UFUNCS[type(e)](x, y), e.dtype)

    def _select(self, e: Select) -> Val:
        cond = np.asarray(self.array(e.condition), dtype=bool)
        outer, self.guarded = self.guarded, True  # a branch may index out of bounds elsewhere
        try:
            a, b = self.array(e.true_value), self.array(e.false_value)
        finally:
            self.guarded = outer
        return fit(np.where(cond, a, b), e.dtype)

    def materialise(self, v: Val) -> Val:
        """`v` as a numpy value: an affine index becomes an int64 grid over the domain."""
        if not isinstance(v, _Affine):
            return v
        result: Val = np.int64(v.const)
        for k, c in enumerate(v.coeffs):
            if c:
                shape = [1] * len(self.extents)
                shape[k] = self.extents[k]
                result = result + c * np.arange(self.extents[k], dtype=np.int64).reshape(shape)
        return result

    # Buffer accesses -------------------------------------------------------------------------

    def load(self, e: BufferLoad) -> Val:
        """Read `e` over the domain: a strided view when affine and in bounds, else a gather."""
        if e.buffer not in self.run.arrays:
            raise RuntimeExecError(f"expected no buffer loads here, got a load of {e.buffer.name}")
        data = self.run.arrays[e.buffer]
        idx = [self.value(i) for i in e.indices]
        if all(isinstance(i, _Affine) for i in idx):
            view = self.strided(data, idx, writeable=False)
            if view is not None:
                return view
        arrays = [np.asarray(self.materialise(i)) for i in idx]
        if self.guarded:
            arrays = [np.clip(a, 0, max(n - 1, 0)) for a, n in zip(arrays, data.shape, strict=True)]
        else:
            _check_bounds(e.buffer, data.shape, arrays)
        return data[tuple(arrays)]

    def strided(self, data: Array, idx: Sequence[_Affine], writeable: bool) -> Array | None:
        """The view of `data` at affine indices over the whole domain; None if out of bounds."""
        for n, a in zip(data.shape, idx, strict=True):
            steps = [c * (e - 1) for c, e in zip(a.coeffs, self.extents, strict=True)]
            low = a.const + sum(min(0, s) for s in steps)
            if low < 0 or a.const + sum(max(0, s) for s in steps) >= n:
                return None
        # the Ellipsis keeps a 0-d buffer's view an array (plain `data[()]` is a scalar copy)
        corner: tuple[slice | EllipsisType, ...] = (
            *(slice(a.const, a.const + 1) for a in idx),
            Ellipsis,
        )
        start = data[corner]
        strides = [
            sum(s * a.coeffs[k] for s, a in zip(data.strides, idx, strict=True))
            for k in range(len(self.extents))
        ]
        return as_strided(start, self.extents, strides, writeable=writeable)


def _affine_binary(e: BinaryOp, a: _Affine, b: _Affine) -> _Affine | None:
    """`a op b` when it stays affine (sums, differences, products by a constant)."""
    if isinstance(e, Add | Sub):
        sign = 1 if isinstance(e, Add) else -1
        coeffs = tuple(x + sign * y for x, y in zip(a.coeffs, b.coeffs, strict=True))
        return _Affine(coeffs, a.const + sign * b.const)
    if isinstance(e, Mul) and (a.is_const() or b.is_const()):
        scale, other = (a.const, b) if a.is_const() else (b.const, a)
        return _Affine(tuple(scale * c for c in other.coeffs), scale * other.const)
    if isinstance(e, FloorDiv | FloorMod | Min | Max) and a.is_const() and b.is_const():
        if isinstance(e, FloorDiv | FloorMod) and b.const == 0:
            return None
        return _Affine(a.coeffs, int(BINARY_UFUNCS[type(e)](a.const, b.const)))
    return None


def _check_bounds(buffer: Buffer, shape: tuple[int, ...], indices: Sequence[Array]) -> None:
    for axis, (idx, n) in enumerate(zip(indices, shape, strict=True)):
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise RuntimeExecError(
                f"buffer {buffer.name}: index on axis {axis} out of range; expected values in "
                f"[0, {n}), got [{idx.min()}, {idx.max()}]"
            )


def _non_overlapping(strides: Sequence[int], extents: Sequence[int]) -> bool:
    """Whether distinct points of a strided view address distinct elements."""
    spans = sorted((abs(s), e) for s, e in zip(strides, extents, strict=True) if e > 1)
    reach = 0
    for stride, extent in spans:
        if stride == 0 or stride <= reach:
            return False
        reach = stride * (extent - 1) + reach
    return True


class _Run:
    """One evaluation: the arrays bound to the buffers and the values of symbolic dims."""

    def __init__(self, arrays: dict[Buffer, Array], symbols: dict[PrimVar, int]) -> None:
        self.arrays, self.symbols = arrays, symbols

    def stmt(self, s: Stmt, scope: _Scope) -> None:
        if isinstance(s, SeqStmt):
            for inner in s.stmts:
                self.stmt(inner, scope)
        elif isinstance(s, For):
            self._loop(s, scope)
        elif isinstance(s, IfThenElse):
            self.stmt(s.then_case, _Scope(scope.loops, scope.iters, (*scope.guards, s.condition)))
            if s.else_case is not None:
                negated = (*scope.guards, Not(s.condition))
                self.stmt(s.else_case, _Scope(scope.loops, scope.iters, negated))
        elif isinstance(s, Block):
            self._block(s, scope)
        elif isinstance(s, BufferStore):
            leaf = _Leaf(self, scope)
            self.write(leaf, s, leaf.value(s.value), None)

    def _loop(self, s: For, scope: _Scope) -> None:
        low, extent = self._int(s.min), self._int(s.extent)
        if extent <= 0:
            return  # an empty loop runs nothing
        loops = (*scope.loops, (s.loop_var, low, extent))
        self.stmt(s.body, _Scope(loops, scope.iters, scope.guards))

    def _int(self, e: PrimExpr) -> int:
        value = _Leaf(self, _Scope()).value(e)
        return int(value.const if isinstance(value, _Affine) else value)

    def _block(self, b: Block, scope: _Scope) -> None:
        iters = {**scope.iters, **{iv.var: iv.value for iv in b.iter_vars}}
        inner = _Scope(scope.loops, iters, scope.guards)
        if b.init is not None:
            self.stmt(b.init, inner)
        reduction = reduction_of(b)
        if reduction is None:
            self.stmt(b.body, inner)
            return
        store, combine, contribution = reduction
        leaf = _Leaf(self, inner)
        self.write(leaf, store, leaf.value(contribution), combine)

    def write(self, leaf: _Leaf, s: BufferStore, value: Val, combine: np.ufunc | None) -> None:
        """Store (or, with `combine`, accumulate) `value` at `s`'s indices over the domain."""
        data = self.arrays[s.buffer]
        idx = [leaf.value(i) for i in s.indices]
        mask = leaf.mask()
        value = leaf.materialise(value)
        if mask is None and all(isinstance(i, _Affine) for i in idx):
            view = leaf.strided(data, idx, writeable=True)
            if view is not None and self._write_view(view, leaf.extents, value, combine):
                return
        self._write_gather(leaf, s.buffer, idx, value, combine, mask)

    def _write_view(self, view: Array, extents: tuple[int, ...], value: Val, combine: Any) -> bool:
        """Write through a strided view; False when points alias (the gather path handles it)."""
        free = tuple(k for k, s in enumerate(view.strides) if s == 0 and extents[k] > 1)
        used = [k for k in range(len(extents)) if k not in free]
        if not _non_overlapping([view.strides[k] for k in used], [extents[k] for k in used]):
            return False
        picks = (slice(0, 1) if k in free else slice(None) for k in range(len(extents)))
        target = view[(*picks, Ellipsis)]  # a view even for a 0-d buffer
        full = np.broadcast_to(value, extents)
        if combine is None:
            # several iterations write one element: the last one wins, as in a sequential loop
            last = full[
                tuple(slice(-1, None) if k in free else slice(None) for k in range(len(extents)))
            ]
            np.copyto(target, last, casting="unsafe")
        else:
            part = full.astype(view.dtype, copy=False)
            if free:
                part = combine.reduce(part, axis=free, keepdims=True)
            combine(target, part, out=target, casting="unsafe")
        return True

    def _write_gather(
        self, leaf: _Leaf, buffer: Buffer, idx: list[Val], value: Val, combine: Any, mask: Any
    ) -> None:
        data = self.arrays[buffer]
        parts = [np.asarray(leaf.materialise(i)) for i in idx]
        parts = list(
            np.broadcast_arrays(*parts, np.asarray(value), *([] if mask is None else [mask]))
        )
        if leaf.extents:
            parts = [np.broadcast_to(p, leaf.extents) for p in parts]
        if mask is not None:
            selected = parts.pop()
            parts = [p[selected] for p in parts]
        values = parts.pop().astype(data.dtype, copy=False)
        _check_bounds(buffer, data.shape, parts)
        if combine is None:
            data[tuple(parts)] = values
        else:
            combine.at(data, tuple(parts), values)


# Public API ----------------------------------------------------------------------------------


def execute(body: Stmt, arrays: dict[Buffer, Array], symbols: dict[PrimVar, int]) -> None:
    """Run a checked kernel body over bound arrays (written in place) and symbolic dims."""
    with np.errstate(all="ignore"):  # IEEE results (inf, nan), as compiled kernels give
        _Run(arrays, symbols).stmt(body, _Scope())


def eval_scalar(expr: PrimExpr, symbols: Mapping[PrimVar, int]) -> int | float | bool:
    """A scalar expression without buffer loads (a shape dim, a prim value) as a Python number."""
    leaf = _Leaf(_Run({}, dict(symbols)), _Scope())
    with np.errstate(all="ignore"):
        value = leaf.value(expr)
    if isinstance(value, _Affine):
        return value.const
    result: int | float | bool = np.asarray(value).item()
    return result
