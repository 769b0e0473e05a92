"""Builders of small PrimFuncs for the TIR and VM tests, written with the TIR nodes directly.

`remap_nest` is the shape TVMScript gives a `T.grid` loop nest holding one block whose iterators
are `T.axis.remap`-ed onto the loop vars; the kernels below are the ones the tests run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lazyparams.ir.prim import (
    EQ,
    Cast,
    Div,
    FloatImm,
    IntImm,
    Intrinsic,
    Max,
    Min,
    PrimExpr,
    PrimVar,
    Select,
    as_prim,
)
from lazyparams.tir import (
    Block,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
)

Dim = int | PrimExpr
Body = Callable[[tuple[PrimVar, ...]], Stmt]


def buf(name: str, shape: Sequence[Dim], dtype: str = "float32") -> Buffer:
    return Buffer(name, tuple(as_prim(d) for d in shape), dtype)


def load(b: Buffer, *indices: PrimExpr | int) -> BufferLoad:
    return BufferLoad(b, tuple(as_prim(i) for i in indices))


def store(b: Buffer, value: PrimExpr, *indices: PrimExpr | int) -> BufferStore:
    return BufferStore(b, value, tuple(as_prim(i) for i in indices))


def nest(loops: Sequence[PrimVar], extents: Sequence[Dim], body: Stmt) -> Stmt:
    for var, extent in reversed(list(zip(loops, extents, strict=True))):
        body = For(var, IntImm(0, "int32"), as_prim(extent), body)
    return body


def remap_nest(
    name: str, extents: Sequence[Dim], kinds: str, body: Body, init: Body | None = None
) -> Stmt:
    """`for ax... in T.grid(*extents): with T.block(name): v... = T.axis.remap(kinds, ax...)`."""
    loops = tuple(PrimVar(f"ax{i}", "int32") for i in range(len(extents)))
    iters = tuple(PrimVar(f"v{i}", "int32") for i in range(len(extents)))
    iter_vars = tuple(
        IterVar(v, as_prim(e), k, ax)  # type: ignore[arg-type]
        for v, e, k, ax in zip(iters, extents, kinds, loops, strict=True)
    )
    block = Block(name, iter_vars, (), (), body(iters), None if init is None else init(iters))
    return nest(loops, extents, block)


def transpose(shape: Sequence[int], axes: Sequence[int], dtype: str = "float32") -> PrimFunc:
    """out[v...] = x[...] with out's axis i being x's axis axes[i] (numpy.transpose)."""
    x = buf("x", shape, dtype)
    out = buf("out", [shape[a] for a in axes], dtype)
    inverse = [list(axes).index(i) for i in range(len(axes))]

    def body(v: tuple[PrimVar, ...]) -> Stmt:
        return store(out, load(x, *(v[inverse[i]] for i in range(len(axes)))), *v)

    return PrimFunc((x, out), remap_nest("transpose", out.shape, "S" * len(axes), body))


def seed_layout_transform() -> PrimFunc:
    """The seed's transform_layout_IOHW_to_OIHW: (3, 16, 3, 3) -> (16, 3, 3, 3)."""
    w1 = buf("w1", (3, 16, 3, 3))
    out = buf("out", (16, 3, 3, 3))

    def body(v: tuple[PrimVar, ...]) -> Stmt:
        o, i, h, w = v
        return store(out, load(w1, i, o, h, w), o, i, h, w)

    return PrimFunc((w1, out), remap_nest("layout_transform", (16, 3, 3, 3), "SSSS", body))


def add_row(n: int, m: int) -> PrimFunc:
    """out[i, j] = a[i, j] + b[0, j] * 2: element-wise with a broadcast row."""
    a, b, out = buf("a", (n, m)), buf("b", (1, m)), buf("out", (n, m))

    def body(v: tuple[PrimVar, ...]) -> Stmt:
        i, j = v
        return store(out, load(a, i, j) + load(b, 0, j) * FloatImm(2.0), i, j)

    return PrimFunc((a, b, out), remap_nest("add_row", (n, m), "SS", body))


def row_sum(n: Dim, k: Dim, dtype: str = "float32") -> PrimFunc:
    """out[i] = sum over k of x[i, k], with `T.init()` zeroing out."""
    x, out = buf("x", (n, k), dtype), buf("out", (n,), dtype)
    zero = FloatImm(0.0, dtype)

    def body(v: tuple[PrimVar, ...]) -> Stmt:
        return store(out, load(out, v[0]) + load(x, v[0], v[1]), v[0])

    def init(v: tuple[PrimVar, ...]) -> Stmt:
        return store(out, zero, v[0])

    return PrimFunc((x, out), remap_nest("sum", (n, k), "SR", body, init))


def cast(shape: Sequence[int], src: str, dst: str) -> PrimFunc:
    """out = T.Cast(dst, x) element-wise."""
    x, out = buf("x", shape, src), buf("out", shape, dst)

    def body(v: tuple[PrimVar, ...]) -> Stmt:
        return store(out, Cast(dst, load(x, *v)), *v)

    return PrimFunc((x, out), remap_nest("cast", shape, "S" * len(shape), body))


def quantize_int8_rows(n: int, k: int) -> PrimFunc:
    """Per-row symmetric int8 quantization of x (n, k) into q (n, k) int8 and scale (n,) float32.

    Three loop nests: max |x| per row (a reduction), the scale (1 where the max is 0), then
    q = clip(round(x / scale), -127, 127).
    """
    x, q, scale = buf("x", (n, k)), buf("q", (n, k), "int8"), buf("scale", (n,))

    def amax(v: tuple[PrimVar, ...]) -> Stmt:
        return store(scale, Max(load(scale, v[0]), Intrinsic("abs", (load(x, v[0], v[1]),))), v[0])

    def zero(v: tuple[PrimVar, ...]) -> Stmt:
        return store(scale, FloatImm(0.0), v[0])

    def to_scale(v: tuple[PrimVar, ...]) -> Stmt:
        s = load(scale, v[0])
        return store(
            scale, Select(EQ(s, FloatImm(0.0)), FloatImm(1.0), Div(s, FloatImm(127.0))), v[0]
        )

    def quant(v: tuple[PrimVar, ...]) -> Stmt:
        scaled = Intrinsic("round", (Div(load(x, v[0], v[1]), load(scale, v[0])),))
        clipped = Max(Min(scaled, FloatImm(127.0)), FloatImm(-127.0))
        return store(q, Cast("int8", clipped), v[0], v[1])

    body = SeqStmt(
        (
            remap_nest("amax", (n, k), "SR", amax, zero),
            remap_nest("scale", (n,), "S", to_scale),
            remap_nest("quantize", (n, k), "SS", quant),
        )
    )
    return PrimFunc((x, q, scale), body)
