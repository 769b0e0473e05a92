"""Structural equality and hashing of TIR: PrimFuncs, buffers, loops, blocks and statements."""

from __future__ import annotations

from typing import Any

import pytest

from lazyparams.ir import GlobalVar, IRModule, structural_equal, structural_hash
from lazyparams.ir.prim import IntImm, Mul, PrimExpr, PrimVar
from lazyparams.tir.nodes import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
)


def equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    result = structural_equal(a, b, map_free_vars)
    if result:
        assert structural_hash(a) == structural_hash(b)
    return result


def transpose(suffix: str = "", **change: Any) -> PrimFunc:
    """The seed's layout kernel `out[o, i] = w[i, o]` over (rows, cols), with optional changes.

    Every var and buffer is fresh and named with `suffix`; `change` alters one piece.
    """
    rows, cols = change.get("rows", 16), 3
    w = Buffer(f"w{suffix}", (IntImm(cols), IntImm(rows)), change.get("dtype", "float32"))
    out = Buffer(f"out{suffix}", (IntImm(rows), IntImm(cols)))
    ax0, ax1 = PrimVar(f"ax0{suffix}"), PrimVar(f"ax1{suffix}")
    o, i = PrimVar(f"o{suffix}"), PrimVar(f"i{suffix}")
    load_idx: tuple[PrimExpr, ...] = (o, i) if change.get("swap_load") else (i, o)
    store: Stmt = BufferStore(out, BufferLoad(w, load_idx), (o, i))
    if change.get("guard"):
        store = IfThenElse(change["guard"](o), store, change.get("else_case"))
    iters = (
        IterVar(o, IntImm(rows), change.get("kind", "S"), ax0),
        IterVar(i, IntImm(cols), "S", ax1),
    )
    reads = (BufferRegion(w, (Range(i, IntImm(1)), Range(o, IntImm(1)))),)
    writes = (BufferRegion(out, (Range(o, IntImm(1)), Range(i, IntImm(change.get("width", 1))))),)
    block = Block(change.get("name", "layout"), iters, reads, writes, store, change.get("init"))
    inner = For(ax1, IntImm(0), IntImm(cols), block)
    loop = For(ax0, IntImm(0), IntImm(rows), inner, change.get("loop_kind", "serial"))
    body: Stmt = SeqStmt((loop,) * change.get("repeat", 1))
    return PrimFunc((w, out), body, change.get("attrs", {}))


def test_prim_funcs_equal_up_to_buffer_and_var_names() -> None:
    assert equal(transpose("_a"), transpose("_b"))
    assert equal(IRModule({"t": transpose("_a")}), IRModule({"t": transpose("_b")}))


@pytest.mark.parametrize(
    "change",
    [
        {"rows": 8},
        {"dtype": "float16"},
        {"swap_load": True},
        {"kind": "R"},
        {"name": "other"},
        {"width": 2},
        {"loop_kind": "parallel"},
        {"repeat": 2},
        {"attrs": {"global_symbol": "t"}},
        {"guard": lambda o: o},
        {"init": BufferStore(Buffer("tmp", (IntImm(1),)), IntImm(0), (IntImm(0),))},
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_tir_piece_counts(change: dict[str, Any]) -> None:
    assert not equal(transpose("_a"), transpose("_b", **change))


def test_if_then_else_branches_count() -> None:
    def guard(o: PrimVar) -> PrimExpr:
        return Mul(o, IntImm(1))

    other = BufferStore(Buffer("z", (IntImm(1),)), IntImm(0), (IntImm(0),))
    with_else = transpose("_b", guard=guard, else_case=other)
    assert equal(transpose("_a", guard=guard), transpose("_b", guard=guard))
    assert not equal(transpose("_a", guard=guard), with_else)


def test_buffers_bind_at_params_and_stay_bound() -> None:
    f = transpose("_a")
    w, out = f.params
    swapped = PrimFunc((out, w), f.body, f.attrs)
    assert not equal(f, swapped)  # the params bind w and out the other way round


def test_free_buffers_equal_only_themselves() -> None:
    a = Buffer("a", (IntImm(4),))
    b = Buffer("b", (IntImm(4),))
    load_a, load_b = BufferLoad(a, (IntImm(0),)), BufferLoad(b, (IntImm(0),))
    assert equal(load_a, BufferLoad(a, (IntImm(0),)))
    assert not equal(load_a, load_b)
    assert equal(load_a, load_b, map_free_vars=True)


def test_symbolic_buffer_shapes_are_defined_by_params() -> None:
    def scale(dim: str, use_param_dim: bool = True) -> PrimFunc:
        n = PrimVar(dim)
        a, b = Buffer("a", (n,)), Buffer("b", (n,))
        i = PrimVar("i")
        extent = n if use_param_dim else PrimVar("k")
        body = For(i, IntImm(0), extent, BufferStore(b, BufferLoad(a, (i,)), (i,)))
        return PrimFunc((a, b), body)

    assert equal(scale("n"), scale("m"))
    assert not equal(scale("n"), scale("m", use_param_dim=False))


def test_loop_vars_are_definitions() -> None:
    def loop(extent_from_var: bool) -> For:
        i = PrimVar("i")
        buf = Buffer("a", (IntImm(4),))
        value = BufferLoad(buf, (i,)) if extent_from_var else IntImm(0)
        return For(i, IntImm(0), IntImm(4), BufferStore(buf, value, (i,)))

    a, b = loop(True), loop(True)
    assert not equal(a, b)  # the buffer is free and differs
    assert equal(a, b, map_free_vars=True)
    assert not equal(a, loop(False), map_free_vars=True)


def test_prim_funcs_in_modules_are_matched_by_name() -> None:
    mod = IRModule({GlobalVar("t"): transpose("_a")})
    assert equal(mod, IRModule({"t": transpose("_b")}))
    assert not equal(mod, IRModule({"u": transpose("_b")}))
