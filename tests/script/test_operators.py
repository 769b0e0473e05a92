"""Python arithmetic between Relax values, as TVM's script reads it: `a + b` is R.add(a, b)."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import Call, Function
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script.parser import parse


@I.ir_module
class Arithmetic:
    @R.function
    def main(a: R.Tensor((2,), "float32"), b: R.Tensor((2,), "float32")):
        c = a + b * a - b / a
        return c


def test_operators_become_the_elementwise_ops() -> None:
    func = Arithmetic["main"]
    assert isinstance(func, Function)
    value = func.bindings()[0].value
    assert isinstance(value, Call) and value.op.name == "subtract"  # type: ignore[union-attr]
    a, b = np.array([1, 2], "float32"), np.array([3, 4], "float32")
    got = VirtualMachine(Arithmetic)["main"](a, b)
    assert np.array_equal(got, a + b * a - b / a)


def test_an_operator_the_ops_lack_is_refused_where_it_is() -> None:
    text = """
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor((2,), "float32")):
        c = a ** a
        return c
"""
    with pytest.raises(ParseError, match=r":6:13: expected a Relax expression"):
        parse(text)


def test_operands_are_checked_like_the_op_s() -> None:
    text = """
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor((2,), "float32"), b: R.Tensor((3,), "float32")):
        c = a + b
        return c
"""
    with pytest.raises(ParseError, match=r":6:13: R.add"):
        parse(text)
