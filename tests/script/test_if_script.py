"""`if cond:` / `else:` in a Relax function: parsed into a binding of an If whose branches end in
the assigned var, printed back in both flavours, refused clearly where TVM refuses it; with
apache-tvm installed, TVM reads our print and we read TVM's."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import (
    DataflowBlock,
    Function,
    If,
    IRModule,
    MatchCast,
    TensorStructInfo,
    Var,
    assert_structural_equal,
)
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R


@I.ir_module
class Branchy:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        w1: R.Tensor((4,), "float32"),
        w2: R.Tensor((4,), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1})
        if cond:
            a = R.add(w1, w1)
            w = R.multiply(a, x)
        else:
            w = w2
        with R.dataflow():
            y = R.add(x, w)
            R.output(y)
        return y


BODY = """\
        R.func_attr({"num_input": 1})
        if cond:
            a: R.Tensor((4,), dtype="float32") = R.add(w1, w1)
            w_then: R.Tensor((4,), dtype="float32") = R.multiply(a, x)
            w: R.Tensor((4,), dtype="float32") = w_then
        else:
            w: R.Tensor((4,), dtype="float32") = w2
        with R.dataflow():
            y: R.Tensor((4,), dtype="float32") = R.add(x, w)
            R.output(y)
        return y
"""
"""The function body as both flavours print it (and as TVM 0.27 prints the same module)."""


def _main(mod: IRModule) -> Function:
    func = mod["main"]
    assert isinstance(func, Function)
    return func


def test_the_if_is_one_binding_whose_branches_end_in_their_results() -> None:
    func = _main(Branchy)
    binding = func.body.blocks[0].bindings[0]
    node = binding.value
    assert isinstance(node, If) and binding.var.name_hint == "w"
    assert node.cond is func.params[3]
    (then_block,) = node.true_branch.blocks
    assert [b.var.name_hint for b in then_block.bindings] == ["a", "w_then"]
    assert node.true_branch.body is then_block.bindings[1].var
    assert node.false_branch.blocks == () and node.false_branch.body is func.params[2]
    assert binding.var.struct_info == TensorStructInfo((4,), "float32")


@pytest.mark.parametrize("flavor", ["lazyparams", "tvm"])
def test_both_flavours_print_the_if_and_read_it_back(flavor: str) -> None:
    text = Branchy.script(flavor=flavor)
    assert BODY in text
    assert_structural_equal(parse(text), Branchy)


@I.ir_module
class Nested:
    @R.function
    def main(
        x: R.Tensor((4,), "float32"), c1: R.Tensor((), "bool"), c2: R.Prim("bool")
    ) -> R.Tensor(dtype="float32", ndim=1):
        if c1:
            if c2:
                y = R.add(x, x)
            else:
                with R.dataflow():
                    t = R.multiply(x, x)
                    u = R.add(t, x)
                    R.output(u)
                y = u
        else:
            y = R.zeros(R.shape([8]), "float32")
        return y


def test_nested_ifs_dataflow_in_a_branch_and_a_prim_condition_round_trip() -> None:
    func = _main(Nested)
    outer = func.body.blocks[0].bindings[0]
    assert outer.var.struct_info == TensorStructInfo(None, "float32", 1)  # (4,) or (8,)
    assert isinstance(outer.value, If)
    inner = outer.value.true_branch.blocks[0].bindings[0].value
    assert isinstance(inner, If)
    assert isinstance(inner.false_branch.blocks[0], DataflowBlock)
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(Nested.script(flavor=flavor)), Nested)


HEAD = """\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")):
"""
"""Module prefix; a case's body lines start at line 5, indented by 8 (column 9)."""


def relax(*body: str) -> str:
    return HEAD + textwrap.indent("\n".join(body), " " * 8) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param(
            relax("if c:", "    y = x", "return y"),
            5,
            "if: expected an else: branch too",
            id="no-else",
        ),
        pytest.param(
            relax("if c:", "    y = x", "else:", "    z = x", "return y"),
            8,
            "expected both branches to bind the same var last, got 'y' in the if branch and 'z'",
            id="different-vars",
        ),
        pytest.param(
            relax(
                "with R.dataflow():",
                "    if c:",
                "        y = x",
                "    else:",
                "        y = x",
                "    R.output(y)",
                "return y",
            ),
            6,
            "if: expected it outside with R.dataflow(): blocks",
            id="in-dataflow",
        ),
        pytest.param(
            relax("if c:", "    pass", "else:", "    y = x", "return y"),
            6,
            "if branch: expected it to end by binding the if's result",
            id="empty-branch",
        ),
        pytest.param(
            relax("if c:", "    t = R.add(x, x)", "    y = t", "else:", "    y = x", "return t"),
            10,
            "undefined variable 't'",
            id="branch-var-leaks",
        ),
    ],
)
def test_a_malformed_if_names_its_line(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(text, file="bad.py")
    assert message in info.value.reason
    assert (info.value.file, info.value.line) == ("bad.py", line), str(info.value)


def test_a_branch_var_does_not_shadow_an_outer_one_after_the_if() -> None:
    mod = parse(
        relax(
            "t = R.add(x, x)", "if c:", "    t = x", "    y = t", "else:", "    y = t", "return t"
        )
    )
    func = _main(mod)
    outer_t = func.body.blocks[0].bindings[0].var
    assert func.body.body is outer_t
    node = func.body.blocks[0].bindings[1].value
    assert isinstance(node, If) and node.false_branch.body is outer_t
    assert isinstance(node.true_branch.body, Var) and node.true_branch.body is not outer_t


@I.ir_module
class ElifAndCast:
    @R.function
    def main(x: R.Object, c1: R.Tensor((), "bool"), c2: R.Tensor((), "bool")) -> R.Tensor(
        (4,), "float32"
    ):
        if c1:
            y = R.match_cast(x, R.Tensor((4,), "float32"))
        elif c2:
            y = R.zeros(R.shape([4]), "float32")
        else:
            y = R.ones(R.shape([4]), "float32")
        return y


def test_elif_and_a_match_cast_result_round_trip() -> None:
    func = _main(ElifAndCast)
    node = func.body.blocks[0].bindings[0].value
    assert isinstance(node, If)
    (cast,) = node.true_branch.blocks[0].bindings
    assert isinstance(cast, MatchCast) and cast.var.name_hint == "y_then"
    inner = node.false_branch.blocks[0].bindings[0]
    assert isinstance(inner.value, If) and inner.var.name_hint == "y_else"  # as TVM names it
    assert node.false_branch.body is inner.var
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(ElifAndCast.script(flavor=flavor)), ElifAndCast)


@I.ir_module
class Computed:
    @R.function
    def main(x: R.Tensor((), "float32"), y: R.Tensor((), "float32")) -> R.Tensor((), "float32"):
        if R.astype(x, "bool"):
            z = x
        else:
            z = y
        return z


def test_a_computed_condition_is_bound_to_a_var_first() -> None:
    func = _main(Computed)
    first, second = func.body.blocks[0].bindings
    assert isinstance(second.value, If) and second.value.cond is first.var
    assert first.var.struct_info == TensorStructInfo((), "bool")
    assert (
        'gv: R.Tensor((), dtype="bool") = R.astype(x, dtype="bool")\n        if gv:'
        in Computed.script()
    )
    assert_structural_equal(parse(Computed.script(flavor="tvm")), Computed)


# Both ways through TVM 0.27 ------------------------------------------------------------------


def _tvm() -> Any:
    return pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")


@pytest.mark.parametrize(
    "mod",
    [Branchy, Nested, ElifAndCast, Computed],
    ids=["branchy", "nested", "elif-and-cast", "computed"],
)
def test_tvm_reads_our_print_as_its_own_parse_and_we_read_its_print(mod: IRModule) -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    ours = from_source(mod.script(flavor="tvm"))
    assert relax.analysis.well_formed(ours) is not False
    text = mod.script(flavor="tvm")
    assert text.startswith("# from tvm.script")
    theirs = from_source(ours.script())  # TVM's own print, parsed by TVM again
    tvm.ir.assert_structural_equal(ours, theirs)
    assert_structural_equal(parse(ours.script()), mod)
