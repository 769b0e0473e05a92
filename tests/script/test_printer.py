"""Printer behaviour beyond the goldens: name clashes, attrs without a spelling, refusals."""

from __future__ import annotations

import pytest

from lazyparams.errors import LazyParamsError
from lazyparams.ir import (
    BindingBlock,
    Call,
    Function,
    IRModule,
    ObjectStructInfo,
    SeqExpr,
    TensorStructInfo,
    Var,
    VarBinding,
)
from lazyparams.ir.prim import PrimVar
from lazyparams.script import parse, print_function
from tests.script.util import roundtrip


def identity(name: str, sinfo: TensorStructInfo) -> Function:
    x = Var(name, sinfo)
    return Function((x,), SeqExpr((), x), sinfo)


def test_a_var_named_like_a_symbolic_dim_gets_another_name() -> None:
    n = PrimVar("n")
    mod = IRModule({"main": identity("n", TensorStructInfo((n,), "float32"))})
    assert 'def main(n_1: R.Tensor(("n",), dtype="float32"))' in mod.script()
    roundtrip(mod)


def test_attrs_without_a_script_spelling_become_comments() -> None:
    func = identity("x", TensorStructInfo((2,), "float32")).with_attr("kernel", print)
    mod = IRModule({"main": func}, {"numpy_kernels": {"f": print}})
    text = mod.script()
    assert '    # attr "numpy_kernels" holds a dict: not printable\n' in text
    assert '        # attr "kernel" holds a builtin_function_or_method: not printable\n' in text
    parsed = parse(text)
    assert parsed.attrs == {} and parsed["main"].attrs == {}


def test_module_of_only_unprintable_attrs_still_parses() -> None:
    text = IRModule({}, {"f": print}).script()
    assert text.endswith(
        '    # attr "f" holds a builtin_function_or_method: not printable\n    pass\n'
    )
    assert len(parse(text)) == 0


def test_print_function_spells_one_standalone_def() -> None:
    text = print_function(identity("x", TensorStructInfo((2,), "float32")), "f")
    assert text.splitlines()[2:] == [
        "@R.function",
        'def f(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):',
        "    return x",
    ]
    assert parse(text).names() == ["f"]


def test_a_call_of_a_function_literal_is_refused() -> None:
    inner = identity("x", TensorStructInfo((2,), "float32"))
    y = Var("y", ObjectStructInfo())
    body = SeqExpr((BindingBlock((VarBinding(y, Call(inner, ())),)),), y)
    mod = IRModule({"main": Function((), body, ObjectStructInfo())})
    with pytest.raises(LazyParamsError, match="cannot print a call of Function"):
        mod.script()


def test_a_function_name_that_is_no_identifier_is_refused() -> None:
    mod = IRModule({"not valid": identity("x", TensorStructInfo((2,), "float32"))})
    with pytest.raises(LazyParamsError, match="expected a Python identifier"):
        mod.script()
