"""Inference and bad input of the unary math ops (abs, sign, sqrt, ..., square)."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.unary import UNARY
from tests.op.helpers import raises, si, t

n = PrimVar("n")
CONSTRUCTORS = {name: getattr(op, name) for name in UNARY}


def test_every_unary_op_has_its_constructor_named_as_in_relax() -> None:
    assert sorted(UNARY) == sorted(
        ["abs", "sign", "sqrt", "sin", "cos", "acos", "exp", "log", "negative", "square"]
    )
    for name, fn in CONSTRUCTORS.items():
        assert fn.__name__ == name and f"R.{name}(x)" in (fn.__doc__ or "")
        assert op.call_op_name(fn(t((2,)))) == name


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "float8_e4m3fn"])
def test_unary_keeps_shape_and_dtype(name: str, dtype: str) -> None:
    fn = CONSTRUCTORS[name]
    assert si(fn(t((4, 1, 3), dtype))) == TensorStructInfo((4, 1, 3), dtype)
    assert si(fn(t((n, 2 * n), dtype))) == TensorStructInfo((n, 2 * n), dtype)
    assert si(fn(t((), dtype))) == TensorStructInfo((), dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_with_unknown_shapes(name: str) -> None:
    fn = CONSTRUCTORS[name]
    assert si(fn(t(None, ndim=3))) == TensorStructInfo(None, "float32", 3)
    assert si(fn(t(None))) == TensorStructInfo(None, "float32")
    assert si(fn(t((2,), ""))) == TensorStructInfo((2,), "")


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "bool"])
def test_unary_refuses_what_is_not_a_float(name: str, dtype: str) -> None:
    with raises(rf"R\.{name}: expected x of a float dtype, got {dtype}"):
        CONSTRUCTORS[name](t((2, 3), dtype))


def test_unary_bad_operands() -> None:
    with raises(r"R\.sqrt: expected x to be a tensor, got R\.Object"):
        op.sqrt(op.call_packed("get_item", op.prim_value(0)))
    with raises(r"R\.abs: expected 1 operands \(x\), got 2"):
        op.abs(t((2,)), t((2,)))
    with raises(r"R\.exp: expected x of an element dtype, got block type q8_0"):
        op.exp(t((2, 32), "q8_0"))
