"""Hypothesis strategies for modules exercising what the op-centred program generator leaves
out: symbolic dims, match_cast, extern calls, constants, leaves, plain blocks, TIR kernels.

Modules are built with BlockBuilder and the op constructors; `tests.programs` supplies the
op-heavy transform programs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.ir import (
    BlockBuilder,
    Call,
    Constant,
    DataflowVar,
    ExternFunc,
    GlobalVar,
    IRModule,
    ObjectStructInfo,
    PrimValue,
    ShapeExpr,
    StringImm,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.prim import Add, FloatImm, IntImm, Max, Mul, PrimExpr, PrimVar
from lazyparams.tir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    Range,
)

Draw = Callable[[st.SearchStrategy[Any]], Any]
DTYPES = ("float32", "float16")


@dataclass
class _Builder:
    """Draws one function into a BlockBuilder; `pool` holds the vars visible at this point."""

    draw: Draw
    bb: BlockBuilder
    n: PrimVar
    pool: list[Var] = field(default_factory=list)
    kernels: dict[str, PrimFunc] = field(default_factory=dict)

    def tensor(self) -> Var | None:
        tensors = [v for v in self.pool if isinstance(v.struct_info, TensorStructInfo)]
        return self.draw(st.sampled_from(tensors)) if tensors else None  # type: ignore[no-any-return]

    def emit(self, value: Any, name: str = "lv") -> None:
        self.pool.append(self.bb.emit(value, name))

    def step(self) -> None:
        action = self.draw(st.sampled_from(sorted(_ACTIONS)))
        _ACTIONS[action](self)

    def unary_op(self) -> None:
        x = self.tensor()
        if x is not None:
            dtype = self.draw(st.sampled_from(DTYPES))
            self.emit(self.draw(st.sampled_from([op.permute_dims(x), op.astype(x, dtype)])))

    def add(self) -> None:
        x = self.tensor()
        if x is not None:
            self.emit(op.add(x, x), "sum")

    def reshape(self) -> None:
        x = self.tensor()
        sinfo = x.struct_info if x is not None else None
        if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
            flat: PrimExpr = IntImm(1)
            for d in sinfo.shape:
                flat = Mul(flat, d) if not (isinstance(flat, IntImm) and flat.value == 1) else d
            self.emit(op.reshape(x, [flat]))  # type: ignore[arg-type]

    def constant(self) -> None:
        shape = self.draw(st.sampled_from([(), (2,), (2, 3)]))
        dtype = self.draw(st.sampled_from(("float32", "float16", "int8", "bool")))
        values = self.draw(st.lists(st.integers(-4, 4), min_size=6, max_size=6))
        data = np.array(values[: int(np.prod(shape))], dtype=np.int64).reshape(shape)
        scaled = data.astype(dtype) / (2 if dtype.startswith("float") else 1)
        self.emit(Constant(np.asarray(scaled, dtype)), "c")

    def leaf(self) -> None:
        value = self.draw(
            st.sampled_from(
                [
                    PrimValue(Add(self.n, IntImm(1))),
                    PrimValue(IntImm(self.draw(st.integers(-5, 5)))),
                    StringImm(self.draw(st.text('ab"\\\n', max_size=4))),
                    ShapeExpr((self.n, IntImm(2))),
                ]
            )
        )
        self.emit(value, "leaf")

    def extern(self) -> None:
        x = self.tensor()
        args = (x,) if x is not None else ()
        sinfo = self.draw(
            st.sampled_from([ObjectStructInfo(), TensorStructInfo((self.n, 2), "float32")])
        )
        self.emit(Call(ExternFunc("ext"), args, {}, (sinfo,)), "ext")

    def match_cast(self) -> None:
        objects = [v for v in self.pool if isinstance(v.struct_info, ObjectStructInfo)]
        if objects:
            m = PrimVar("m")
            target = TensorStructInfo((m, IntImm(2)), "float32")
            self.pool.append(self.bb.match_cast(self.draw(st.sampled_from(objects)), target, "mc"))

    def tuple_item(self) -> None:
        x, y = self.tensor(), self.tensor()
        if x is not None and y is not None:
            self.emit(TupleGetItem(Tuple((x, y)), self.draw(st.integers(0, 1))), "item")

    def call_tir(self) -> None:
        x = self.tensor()
        sinfo = x.struct_info if x is not None else None
        if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and sinfo.ndim == 2:
            name = f"kernel{len(self.kernels)}"
            self.kernels[name] = _kernel(self.draw, sinfo.shape, sinfo.dtype)
            self.emit(op.call_tir(GlobalVar(name), (x,), sinfo), "tir")  # type: ignore[arg-type]


_ACTIONS: dict[str, Callable[[_Builder], None]] = {
    name: getattr(_Builder, name)
    for name in (
        "unary_op",
        "add",
        "reshape",
        "constant",
        "leaf",
        "extern",
        "match_cast",
        "tuple_item",
        "call_tir",
    )
}


def _kernel(draw: Draw, shape: tuple[PrimExpr, ...], dtype: str) -> PrimFunc:
    """An elementwise kernel `B[i, j] = f(A[i, j])` over `shape`, as one block in a grid."""
    own = {d: PrimVar(d.name) for d in shape if isinstance(d, PrimVar)}  # the kernel's own dims
    dims = tuple(own.get(d, d) if isinstance(d, PrimVar) else d for d in shape)
    a, b = Buffer("A", dims, dtype), Buffer("B", dims, dtype)
    i, j, vi, vj = PrimVar("i"), PrimVar("j"), PrimVar("vi"), PrimVar("vj")
    load = BufferLoad(a, (vi, vj))
    value = draw(st.sampled_from([load, *_arithmetic(load, dtype)]))
    point = (Range(vi, IntImm(1)), Range(vj, IntImm(1)))
    block = Block(
        "compute",
        (IterVar(vi, dims[0], "S", i), IterVar(vj, dims[1], "S", j)),
        (BufferRegion(a, point),),
        (BufferRegion(b, point),),
        BufferStore(b, value, (vi, vj)),
    )
    return PrimFunc((a, b), For(i, IntImm(0), dims[0], For(j, IntImm(0), dims[1], block)))


def _arithmetic(load: BufferLoad, dtype: str) -> list[PrimExpr]:
    """`max(x, 0)` and `x * 2` with immediates of the kernel's dtype (none for bool)."""
    if dtype == "bool":
        return []
    if dtype.startswith("float"):
        return [Max(load, FloatImm(0.0, dtype)), Mul(load, FloatImm(2.0, dtype))]
    return [Max(load, IntImm(0, dtype)), Mul(load, IntImm(2, dtype))]


@st.composite
def script_modules(draw: Draw) -> IRModule:
    """A module with one `main` of alternating plain and dataflow blocks, plus its kernels."""
    bb, n = BlockBuilder(), PrimVar("n")
    # x0 has the symbolic dim, so `n` is defined by the signature wherever else it appears.
    rows = [n] + [draw(st.sampled_from([n, IntImm(3)])) for _ in range(draw(st.integers(0, 2)))]
    params = [
        bb.new_var(f"x{i}", TensorStructInfo((d, IntImm(2)), draw(st.sampled_from(DTYPES))))
        for i, d in enumerate(rows)
    ]
    params.append(bb.new_var("obj", ObjectStructInfo()))
    gen = _Builder(draw, bb, n, list(params))
    dataflow = draw(st.booleans())
    for _ in range(draw(st.integers(1, 3))):
        bb.begin_block(dataflow)
        for _ in range(draw(st.integers(1, 4))):
            gen.step()
        if dataflow:
            _close_dataflow(gen)
        dataflow = not dataflow
    bb.end_block()
    results = draw(st.lists(st.sampled_from(gen.pool), min_size=1, max_size=3))
    func = bb.finish_function(tuple(params), Tuple(tuple(results)), is_pure=False)
    return IRModule({"main": func, **gen.kernels})


def _close_dataflow(gen: _Builder) -> None:
    """End a dataflow block: expose its last value as an output; its dataflow vars go away."""
    last = gen.pool[-1]
    if isinstance(last, DataflowVar):
        gen.pool.append(gen.bb.emit_output(last, "gv"))
    gen.pool[:] = [v for v in gen.pool if not isinstance(v, DataflowVar)]
