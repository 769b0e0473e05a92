"""Blocks without `T.reads` / `T.writes`: the regions are inferred from the body as TVMScript
infers them (points, inner-loop ranges, reductions with an init), a region written out is kept,
accesses whose union is not a range are refused; with the `tvm` extra, TVM's parser infers the
same regions from the same text."""

from __future__ import annotations

from typing import Any

import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import IRModule
from lazyparams.script import parse
from lazyparams.tir.nodes import Block, PrimFunc, Stmt

BARE = """
@I.ir_module
class Module:
    @T.prim_func
    def copy(w1: T.Buffer((3, 4), "float32"), out: T.Buffer((4, 3), "float32")):
        for i, j in T.grid(4, 3):
            with T.block("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = w1[vj, vi] + w1[vj, vi]

    @T.prim_func
    def total(a: T.Buffer((4, 8), "float32"), c: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("r"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    c[vi] = T.float32(0)
                c[vi] = c[vi] + a[vi, vk]

    @T.prim_func
    def shifted(a: T.Buffer((4, 8), "float32"), c: T.Buffer((4,), "float32")):
        for i in T.grid(4):
            with T.block("s"):
                vi = T.axis.remap("S", [i])
                for k in range(7):
                    c[vi] = c[vi] + a[vi, k + 1] * a[vi, k]
"""

EXPECTED = {
    "copy": ("w1[vj, vi]", "out[vi, vj]"),
    "total": ("a[vi, vk]", "c[vi]"),
    "shifted": ("c[vi], a[vi, 0:8]", "c[vi]"),
}


def _block(stmt: Stmt) -> Block:
    while not isinstance(stmt, Block):
        stmt = stmt.body  # type: ignore[attr-defined]
    return stmt


def _mod() -> IRModule:
    return parse(BARE)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_omitted_regions_are_the_union_of_the_body_s_accesses(name: str) -> None:
    reads, writes = EXPECTED[name]
    text = _mod().script()
    assert f"T.reads({reads})" in text and f"T.writes({writes})" in text
    func = _mod()[name]
    assert isinstance(func, PrimFunc)
    assert _block(func.body).reads, "the inferred regions are part of the IR, not the printer"


def test_written_regions_are_kept_and_only_the_missing_one_is_inferred() -> None:
    text = BARE.replace(
        "vi, vj = T.axis.remap", "T.reads(w1[0:3, 0:4])\n                vi, vj = T.axis.remap"
    )
    printed = parse(text).script()
    assert "T.reads(w1[0:3, 0:4])" in printed and "T.writes(out[vi, vj])" in printed
    explicit_empty = BARE.replace(
        'vi, vk = T.axis.remap("SR", [i, k])',
        'vi, vk = T.axis.remap("SR", [i, k])\n                T.reads()\n                T.writes()',
    )
    block = _block(_func(parse(explicit_empty), "total").body)
    assert block.reads == () and block.writes == ()


def _func(mod: IRModule, name: str) -> PrimFunc:
    func = mod[name]
    assert isinstance(func, PrimFunc)
    return func


def test_accesses_whose_union_is_not_a_range_are_refused() -> None:
    bad = BARE.replace("w1[vj, vi] + w1[vj, vi]", "w1[vj, vi] + w1[vi - 1, vj]")
    with pytest.raises(ParseError, match=r"block 't': cannot infer the region of buffer w1"):
        parse(bad)


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    return tvm


def test_tvm_infers_the_same_regions_from_the_same_text() -> None:
    tvm = _tvm()
    from tvm.script import from_source

    ours = _mod().script(flavor="tvm")
    bare = "\n".join(line for line in ours.splitlines() if "T.reads" not in line)
    bare = "\n".join(line for line in bare.splitlines() if "T.writes" not in line)
    tvm.ir.assert_structural_equal(from_source(ours), from_source(bare))
