"""The Relax If: its construction, struct info (the branches' common one), structural equality
and hashing, the visitor and the mutator, and its one-line description."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.analysis.describe import expr_text
from lazyparams.ir import (
    BindingBlock,
    ExprMutator,
    ExprVisitor,
    If,
    ObjectStructInfo,
    PrimStructInfo,
    SeqExpr,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
    structural_equal,
    structural_hash,
)
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.ir.struct_info import StructInfo, tensor
from lazyparams.ir.struct_info_lca import struct_info_lca

COND = TensorStructInfo((), "bool")


A, B, C = Var("a", tensor((4,), "float32")), Var("b", tensor((4,), "float32")), Var("c", COND)


def _if(a: Var = A, b: Var = B, cond: Var = C) -> If:
    """`if cond: t = a + a; (t) else: (b)`."""
    local = Var("t", a.struct_info)
    then = SeqExpr((BindingBlock((VarBinding(local, op.add(a, a)),)),), local)
    return If(cond, then, b)


def test_a_bare_branch_is_wrapped_into_a_seq_expr() -> None:
    a, cond = Var("a", tensor((4,), "float32")), Var("c", COND)
    node = If(cond, a, a)
    assert isinstance(node.true_branch, SeqExpr) and node.true_branch.blocks == ()
    assert node.true_branch.body is a and node.false_branch.body is a


N = PrimVar("n")


@pytest.mark.parametrize(
    ("a", "b", "common"),
    [
        (tensor((4,), "float32"), tensor((4,), "float32"), tensor((4,), "float32")),
        (tensor((4,), "float32"), tensor((8,), "float32"), TensorStructInfo(None, "float32", 1)),
        (tensor((4,), "float32"), tensor((4, 2), "float32"), TensorStructInfo(None, "float32")),
        (tensor((4,), "float32"), tensor((4,), "int8"), tensor((4,), "")),
        (tensor((N,), "float32"), tensor((N,), "float32"), tensor((N,), "float32")),
        (
            tensor((N,), "float32"),
            tensor((PrimVar("n"),), "float32"),
            TensorStructInfo(None, "float32", 1),
        ),
        (
            TupleStructInfo((tensor((4,), "float32"), PrimStructInfo("int64", IntImm(3)))),
            TupleStructInfo((tensor((4,), "float16"), PrimStructInfo("int64", IntImm(5)))),
            TupleStructInfo((tensor((4,), ""), PrimStructInfo("int64"))),
        ),
        (TupleStructInfo((COND,)), TupleStructInfo((COND, COND)), ObjectStructInfo()),
        (PrimStructInfo("int64"), PrimStructInfo("int32"), ObjectStructInfo()),
        (ShapeStructInfo((IntImm(2),)), ShapeStructInfo((IntImm(3),)), ShapeStructInfo(ndim=1)),
        (ShapeStructInfo((IntImm(2),)), ShapeStructInfo(ndim=2), ShapeStructInfo()),
        (tensor((4,), "float32"), ObjectStructInfo(), ObjectStructInfo()),
        (tensor((4,), "float32"), PrimStructInfo("float32"), ObjectStructInfo()),
    ],
)
def test_the_struct_info_is_the_branches_least_specific_common_one(
    a: StructInfo, b: StructInfo, common: StructInfo
) -> None:
    assert struct_info_lca(a, b) == common
    assert struct_info_lca(b, a) == common
    node = If(Var("c", COND), Var("x", a), Var("y", b))
    assert struct_info_of(node) == common


def test_equal_ifs_compare_and_hash_alike_whatever_their_names() -> None:
    first = _if()
    second = _if()
    assert first is not second
    assert structural_equal(first, second)
    assert structural_hash(first) == structural_hash(second)
    swapped = If(C, second.false_branch, second.true_branch)
    assert not structural_equal(first, swapped)
    other_cond = If(Var("d", COND), first.true_branch, first.false_branch)
    assert not structural_equal(first, other_cond)
    assert structural_equal(first, other_cond, map_free_vars=True)


def test_the_visitor_sees_the_condition_and_both_branches_in_order() -> None:
    node = _if()
    seen: list[str] = []

    class Names(ExprVisitor):
        def visit_var_(self, var: Var) -> None:
            seen.append(var.name_hint)

        def visit_var_def(self, var: Var) -> None:
            seen.append(f"def {var.name_hint}")

    Names().visit_expr(node)
    assert seen == ["c", "a", "a", "def t", "t", "b"]


def test_the_mutator_rebuilds_a_branch_apart_from_the_open_block() -> None:
    node = _if()
    replacement = Var("a2", tensor((4,), "float32"))
    mutator = ExprMutator()
    mutator.var_remap[A] = replacement
    mutator.builder.begin_block(False)
    mutator.builder.emit(op.add(B, B), "outer")
    rewritten = mutator.visit_expr(node)
    assert isinstance(rewritten, If) and rewritten is not node
    (inner,) = rewritten.true_branch.blocks[0].bindings
    assert inner.value.args == (replacement, replacement)  # type: ignore[attr-defined]
    assert rewritten.false_branch is node.false_branch  # nothing there changed
    (outer,) = mutator.builder.take_blocks()
    assert [b.var.name_hint for b in outer.bindings] == ["outer"]  # the branch went elsewhere
    untouched = ExprMutator().visit_expr(node)
    assert untouched is node


def test_an_if_is_described_in_one_line() -> None:
    node = _if()
    assert expr_text(node) == "(t if c else b)"
