"""Arithmetic on shape dims, static or symbolic, for struct-info inference.

A dim is read as a polynomial: integer coefficients times products of opaque factors (vars,
floor divisions, ...). Two dims are equal when their polynomials are, so `4 * n` equals `n * 4`
and `n + n` equals `2 * n`; dims the op layer computes are rebuilt from that normal form.
Imports `ir` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lazyparams.ir.prim import (
    LT,
    Add,
    FloorDiv,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    PrimVar,
    Select,
    Sub,
    as_prim,
    const_int,
)

END_OF_AXIS = 2**31 - 1
"""A slice end at or past this value means "to the end of the axis", even for symbolic dims."""

Term = tuple[int, list[PrimExpr]]
"""A coefficient times a product of opaque factors; a polynomial is a list of them."""


def is_one(dim: PrimExpr) -> bool:
    """True for the static dim 1."""
    return const_int(dim) == 1


def _poly(expr: PrimExpr) -> list[Term]:
    """`expr` as a polynomial over its opaque factors, like terms combined."""
    value = const_int(expr)
    if value is not None:
        return _combine([(value, [])])
    if isinstance(expr, Add):
        return _combine(_poly(expr.a) + _poly(expr.b))
    if isinstance(expr, Sub):
        return _combine(_poly(expr.a) + _scale(_poly(expr.b), -1))
    if isinstance(expr, Mul):
        pa, pb = _poly(expr.a), _poly(expr.b)
        return _combine([(ca * cb, fa + fb) for ca, fa in pa for cb, fb in pb])
    return [(1, [expr])]


def _scale(terms: list[Term], k: int) -> list[Term]:
    return [(c * k, f) for c, f in terms]


def _combine(terms: list[Term]) -> list[Term]:
    """Add up terms over the same factors (in any order) and drop those that cancel."""
    out: list[Term] = []
    for c, f in terms:
        for i, (oc, of) in enumerate(out):
            if len(of) == len(f) and _remove_all(of, f) == []:
                out[i] = (oc + c, of)
                break
        else:
            out.append((c, list(f)))
    return [t for t in out if t[0] != 0]


def _remove_all(pool: list[PrimExpr], items: Iterable[PrimExpr]) -> list[PrimExpr] | None:
    """`pool` without one structurally equal copy of each of `items`, or None if one is absent."""
    rest = list(pool)
    for item in items:
        for i, candidate in enumerate(rest):
            if candidate == item:
                del rest[i]
                break
        else:
            return None
    return rest


def _monomial(const: int, symbolic: Sequence[PrimExpr]) -> PrimExpr:
    """The product `f0 * f1 * ... * const` in the folded form prim arithmetic produces."""
    result: PrimExpr = IntImm(1)
    for f in symbolic:
        result = result * f
    return result * const


def _build(terms: list[Term]) -> PrimExpr:
    """A polynomial as a prim expression: positive terms, then negative ones, then the constant."""
    result: PrimExpr = IntImm(0)
    for c, f in terms:
        if f and c > 0:
            result = result + _monomial(c, f)
    for c, f in terms:
        if f and c < 0:
            result = result - _monomial(-c, f)
    const = sum(c for c, f in terms if not f)
    return result + const if const >= 0 else result - (-const)


def simplify(dim: PrimExpr) -> PrimExpr:
    """`dim` rebuilt from its polynomial normal form (`(n - 1) - 1` becomes `n - 2`)."""
    static = isinstance(dim, IntImm) and dim.imm_dtype == "int64"  # already in normal form
    return dim if static else _build(_poly(dim))


def dims_equal(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two dims are provably equal: their polynomials agree."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):  # static shapes: no polynomial needed
        return a.value == b.value
    return a == b or not _combine(_poly(a) + _scale(_poly(b), -1))


def dims_differ(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two dims provably differ: by a constant, or as `k * m` against `j * m`, k != j."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value != b.value
    pa, pb = _poly(a), _poly(b)
    diff = _combine(pa + _scale(pb, -1))
    if not diff:
        return False
    if all(not f for _, f in diff):
        return True
    return len(pa) == len(pb) == 1 and len(_combine(pa + pb)) == 1


def product(dims: Iterable[PrimExpr]) -> PrimExpr:
    """The product of several dims (1 for none), folded so static shapes stay ints."""
    result: PrimExpr = IntImm(1)
    for d in dims:
        result = result * d
    return simplify(result)


def exact_div(a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """`a / b` when b provably divides a (b a monomial found in every term of a), else None."""
    pb = _poly(b)
    if not pb:
        return None
    if len(pb) != 1:
        return IntImm(1) if dims_equal(a, b) else None
    cb, fb = pb[0]
    quotient: list[Term] = []
    for ca, fa in _poly(a):
        rest = _remove_all(fa, fb)
        if rest is None or ca % cb != 0:
            return None
        quotient.append((ca // cb, rest))
    return _build(quotient)


def div_dim(a: PrimExpr, b: PrimExpr | int) -> PrimExpr:
    """`a // b`, simplified when b provably divides a."""
    pb = as_prim(b)
    exact = exact_div(a, pb)
    return exact if exact is not None else FloorDiv(a, pb)


def slice_extent(
    dim: PrimExpr, begin: int | PrimExpr, end: int | PrimExpr, stride: int
) -> PrimExpr:
    """Length of `range(dim)[begin:end:stride]`; numpy's clamping where `dim` is static.

    A symbolic dim cannot be clamped, so its static begin and end are taken to lie inside the
    axis: a negative one counts from the end, and one of magnitude `END_OF_AXIS` or more stands
    for "past the end" in its direction, as numpy's None would. A symbolic bound (TVM's
    `begin=[k]`) is clamped as numpy clamps, by `T.min` / `T.max` in the extent.
    """
    static = const_int(dim)
    if isinstance(begin, int) and isinstance(end, int) and static is not None:
        return IntImm(len(range(static)[begin:end:stride]))
    both_static = isinstance(begin, int) and isinstance(end, int)
    lo, hi = _position(dim, begin, stride), _position(dim, end, stride)
    span = hi - lo if stride > 0 else lo - hi
    if not (both_static or _ordered(begin, end, stride)):
        span = _fold_max(span, IntImm(0))
    step = abs(stride)
    extent = span if step == 1 else (span + (step - 1)) // step
    value = const_int(extent)
    return IntImm(max(value, 0)) if value is not None else simplify(extent)


def _position(dim: PrimExpr, index: int | PrimExpr, stride: int) -> PrimExpr:
    """Where a slice bound points on the axis; huge static bounds stand for "past either end"."""
    if not isinstance(index, int):
        return _clamped(dim, index, stride)
    static = const_int(dim)
    if static is not None:  # a static bound beside a symbolic one: numpy's clamping, exactly
        low, high = (0, static) if stride > 0 else (-1, static - 1)
        return IntImm(min(max(index + static if index < 0 else index, low), high))
    if index >= END_OF_AXIS:
        return dim if stride > 0 else dim - 1
    if index <= -END_OF_AXIS:
        return IntImm(0) if stride > 0 else IntImm(-1)
    return dim - (-index) if index < 0 else as_prim(index)


def _clamped(dim: PrimExpr, index: PrimExpr, stride: int) -> PrimExpr:
    """A symbolic bound as numpy places it: counted from the end when negative, then clamped
    into the axis (`[0, dim]` going forward, `[-1, dim - 1]` going back). Symbolic vars are
    sizes, never negative, as TVM takes the vars of shapes; the VM checks the extent anyway."""
    if _non_negative(index):
        return _fold_min(index, dim if stride > 0 else dim - 1)
    position = Select(LT(index, IntImm(0)), simplify(index + dim), index)
    if stride > 0:
        return _fold_min(_fold_max(position, IntImm(0)), dim)
    return _fold_min(_fold_max(position, IntImm(-1)), dim - 1)


def _ordered(begin: int | PrimExpr, end: int | PrimExpr, stride: int) -> bool:
    """Provably no negative span: both bounds non-negative (so clamped by the same monotone
    `T.min`) and `end - begin` (going forward, else `begin - end`) non-negative."""
    if not all(_non_negative(as_prim(b)) and not _huge(b) for b in (begin, end)):
        return False
    return _non_negative(simplify(as_prim(end) - begin if stride > 0 else as_prim(begin) - end))


def _huge(bound: int | PrimExpr) -> bool:
    return isinstance(bound, int) and bound >= END_OF_AXIS


def _non_negative(expr: PrimExpr) -> bool:
    """Provably `expr >= 0`: a polynomial with non-negative coefficients over sizes (vars, and
    the `T.min` / `T.max` of sizes)."""
    return all(c >= 0 and all(_is_size(f) for f in fs) for c, fs in _poly(expr))


def _is_size(factor: PrimExpr) -> bool:
    if isinstance(factor, Min | Max):
        return _non_negative(factor.a) and _non_negative(factor.b)
    return isinstance(factor, PrimVar)


def _fold_min(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """`T.min(a, b)`, folded when both are static or provably equal."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(min(a.value, b.value))
    return a if dims_equal(a, b) else Min(a, b)


def _fold_max(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """`T.max(a, b)`, folded when both are static or provably equal."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(max(a.value, b.value))
    return a if dims_equal(a, b) else Max(a, b)
