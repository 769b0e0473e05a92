"""Analyses of functions with an If: well_formed's rules for it, liveness (an If reads what its
branches read from outside), and the memory model's refusal (the peak depends on the branch)."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.analysis import check_budget, estimate_peak_memory, liveness, well_formed
from lazyparams.errors import TransformError, WellFormedError
from lazyparams.ir import (
    BindingBlock,
    DataflowBlock,
    Function,
    If,
    MatchCast,
    ObjectStructInfo,
    SeqExpr,
    ShapeExpr,
    TensorStructInfo,
    Var,
    VarBinding,
)
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import tensor
from lazyparams.script import relax as R

F4 = tensor((4,), "float32")


@R.function
def branchy(
    x: R.Tensor((4,), "float32"), w: R.Tensor((4,), "float32"), cond: R.Tensor((), "bool")
) -> R.Tensor((4,), "float32"):
    if cond:
        a = R.add(w, w)
        y = R.multiply(a, x)
    else:
        y = x
    z = R.add(y, w)
    return z


def _function(
    cond_sinfo: TensorStructInfo | ObjectStructInfo, *, dataflow: bool = False, leak: bool = False
) -> Function:
    """`y = if c: (t = x + x; t) else: x; return y` built by hand, with the given condition
    type, optionally inside a dataflow block or returning the branch's own `t`."""
    x, cond = Var("x", F4), Var("c", cond_sinfo)
    t, y = Var("t", F4), Var("y", F4)
    then = SeqExpr((BindingBlock((VarBinding(t, op.add(x, x)),)),), t)
    block_type = DataflowBlock if dataflow else BindingBlock
    body = SeqExpr((block_type((VarBinding(y, If(cond, then, x)),)),), t if leak else y)
    return Function((x, cond), body, F4)


def test_a_function_with_an_if_is_well_formed() -> None:
    well_formed(branchy)
    well_formed(_function(TensorStructInfo((), "bool")))


@pytest.mark.parametrize(
    "cond",
    [TensorStructInfo((), "int32"), TensorStructInfo((1,), "bool"), ObjectStructInfo()],
    ids=["int", "one-d", "object"],
)
def test_the_condition_must_be_a_boolean_scalar(cond: TensorStructInfo) -> None:
    with pytest.raises(WellFormedError, match="the If's condition must be a boolean scalar"):
        well_formed(_function(cond))


def test_no_if_inside_a_dataflow_block() -> None:
    with pytest.raises(WellFormedError, match=r"binding 0 .*an If inside a dataflow block"):
        well_formed(_function(TensorStructInfo((), "bool"), dataflow=True))


def test_a_branch_var_does_not_leak_out() -> None:
    with pytest.raises(WellFormedError, match="var 't' is used outside its scope"):
        well_formed(_function(TensorStructInfo((), "bool"), leak=True))


def test_a_dim_a_branch_defines_stays_in_the_branch() -> None:
    n = PrimVar("n")
    x, cond = Var("x", ObjectStructInfo()), Var("c", TensorStructInfo((), "bool"))
    cast = Var("m", tensor((n,), "float32"))
    then = SeqExpr((BindingBlock((MatchCast(cast, x, cast.struct_info),)),), x)
    y = Var("y", ObjectStructInfo())
    after = Var("z", tensor((n,), "float32"))
    blocks = (
        BindingBlock((VarBinding(y, If(cond, then, x)), MatchCast(after, y, after.struct_info))),
    )
    well_formed(Function((x, cond), SeqExpr(blocks, y), ObjectStructInfo()))  # defined again
    bad = (
        BindingBlock(
            (
                VarBinding(y, If(cond, then, x)),
                VarBinding(Var("u", ObjectStructInfo()), ShapeExpr((n,))),
            )
        ),
    )
    with pytest.raises(WellFormedError, match="symbolic dim 'n' is used before its definition"):
        well_formed(Function((x, cond), SeqExpr(bad, y), ObjectStructInfo()))


def test_an_if_reads_what_its_branches_read_from_outside() -> None:
    live = liveness(branchy)
    x, w, cond = branchy.params
    assert [v.name_hint for v in live.uses[0]] == ["cond", "w", "x"]
    assert live.last_use[x] == 0 and live.last_use[cond] == 0
    assert live.last_use[w] == 1  # z = y + w reads it again
    assert all(v.name_hint != "a" for v in live.last_use)  # the branch's own var is not read


def test_the_memory_model_refuses_an_if_naming_it() -> None:
    message = r"binding 0 \(y\) is an if/else, whose peak depends on the branch taken"
    with pytest.raises(TransformError, match=message):
        estimate_peak_memory(branchy)
    with pytest.raises(TransformError, match=message):
        check_budget(branchy, 1 << 20)
