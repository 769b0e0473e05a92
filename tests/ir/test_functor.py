"""ExprVisitor and ExprMutator: visiting order, and rewrites that rebind and remap vars."""

from __future__ import annotations

from typing import Any

import pytest

from lazyparams import op
from lazyparams.errors import LazyParamsError
from lazyparams.ir import (
    Call,
    DataflowVar,
    Expr,
    ExprMutator,
    ExprVisitor,
    Function,
    MatchCast,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    assert_structural_equal,
)
from lazyparams.script import relax as R


@R.function
def before(
    params: R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
) -> R.Tuple(R.Tensor((3, 2), dtype="float32"), R.Tensor((3,), dtype="float32")):
    w: R.Tensor((2, 3), dtype="float32") = params[0]
    with R.dataflow():
        t: R.Tensor((3, 2), dtype="float32") = R.permute_dims(w, axes=None)
        b: R.Tensor((3,), dtype="float32") = R.match_cast(params[1], R.Tensor((3,), "float32"))
        gv: R.Tuple(R.Tensor((3, 2), dtype="float32"), R.Tensor((3,), dtype="float32")) = (t, b)
        R.output(gv)
    return gv


@R.function
def expected(
    params: R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((3,), dtype="float32")),
) -> R.Tuple(R.Tensor((3, 2), dtype="float32"), R.Tensor((3,), dtype="float32")):
    w: R.Tensor((2, 3), dtype="float32") = params[0]
    with R.dataflow():
        t: R.Tensor((3, 2), dtype="float16") = R.astype(
            R.permute_dims(w, axes=None), dtype="float16"
        )
        b: R.Tensor((3,), dtype="float32") = R.match_cast(params[1], R.Tensor((3,), "float32"))
        gv: R.Tuple(R.Tensor((3, 2), dtype="float16"), R.Tensor((3,), dtype="float32")) = (t, b)
        R.output(gv)
    return gv


class Recorder(ExprVisitor):
    """Records what it meets, in order: definitions, uses and calls."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def visit_var_def(self, var: Var) -> None:
        self.events.append(("def", var.name_hint))

    def visit_var_(self, var: Var) -> None:
        self.events.append(("use", var.name_hint))

    def visit_call_(self, call: Call) -> None:
        self.events.append(("call", str(getattr(call.op, "name", "?"))))
        super().visit_call_(call)


def test_the_visitor_sees_params_then_each_value_before_its_var() -> None:
    recorder = Recorder()
    recorder.visit_expr(before)
    assert recorder.events == [
        ("def", "params"),
        ("use", "params"),
        ("def", "w"),
        ("call", "permute_dims"),
        ("use", "w"),
        ("def", "t"),
        ("use", "params"),
        ("def", "b"),
        ("use", "t"),
        ("use", "b"),
        ("def", "gv"),
        ("use", "gv"),
    ]


def test_dataflow_var_uses_reach_visit_var_unless_overridden() -> None:
    class DataflowUses(Recorder):
        def visit_dataflow_var_(self, var: DataflowVar) -> None:
            self.events.append(("dataflow", var.name_hint))

    recorder = DataflowUses()
    recorder.visit_expr(before)
    assert ("dataflow", "t") in recorder.events and ("use", "t") not in recorder.events


class CastTransposes(ExprMutator):
    """Rewrites every `R.permute_dims(x)` into `R.astype(R.permute_dims(x), "float16")`."""

    def visit_call_(self, call: Call) -> Expr:
        new = super().visit_call_(call)
        if isinstance(new, Call) and getattr(new.op, "name", "") == "permute_dims":
            return op.astype(new, "float16")
        return new


def test_a_rewritten_binding_gets_a_new_var_and_later_uses_follow_it() -> None:
    mutator = CastTransposes()
    after = mutator.visit_expr(before)
    assert isinstance(after, Function)
    assert_structural_equal(after, expected)
    old, new = before.bindings(), after.bindings()
    assert new[0] is old[0] and new[2] is old[2]  # untouched bindings are kept as they are
    assert new[1].var is not old[1].var and isinstance(new[1].var, DataflowVar)
    assert mutator.var_remap[old[1].var] is new[1].var
    assert new[3].var is not old[3].var  # gv's tuple changed with t


def test_a_mutator_without_rewrites_keeps_every_node() -> None:
    mutator = ExprMutator()
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    for expr in (op.permute_dims(x), Tuple((x, x)), TupleGetItem(Tuple((x,)), 0)):
        assert mutator.visit_expr(expr) is expr
    assert mutator.visit_expr(before) is before


def test_a_match_cast_keeps_its_var_when_its_value_is_rewritten() -> None:
    class Renumber(ExprMutator):
        def visit_tuple_getitem_(self, item: TupleGetItem) -> Any:
            return TupleGetItem(self.visit_expr(item.tuple_value), item.index)

    after = Renumber().visit_expr(before)
    assert isinstance(after, Function)
    casts = [b for b in after.bindings() if isinstance(b, MatchCast)]
    (cast,) = casts
    original = next(b for b in before.bindings() if isinstance(b, MatchCast))
    assert cast is not original and cast.var is original.var
    assert cast.value is not original.value


def test_a_value_that_is_no_relax_expression_is_refused() -> None:
    with pytest.raises(LazyParamsError, match="expected a Relax expression, got int"):
        ExprVisitor().visit_expr(3)  # type: ignore[arg-type]
