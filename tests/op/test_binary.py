"""Inference and bad input of the broadcasting arithmetic ops and matmul."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from tests.op.helpers import raises, si, t

n, m = PrimVar("n"), PrimVar("m")
ELEMENTWISE = [op.add, op.subtract, op.multiply, op.divide]


@pytest.mark.parametrize("fn", ELEMENTWISE)
def test_elementwise_broadcasts_like_numpy(fn) -> None:  # type: ignore[no-untyped-def]
    assert si(fn(t((4, 1, 3)), t((5, 1)))) == TensorStructInfo((4, 5, 3), "float32")
    assert si(fn(t((n, 4)), t((4,)))) == TensorStructInfo((n, 4), "float32")
    assert si(fn(t((1, m)), t((n, 1)))) == TensorStructInfo((n, m), "float32")
    assert si(fn(t((n * 2,)), t((2 * n,)))) == TensorStructInfo((2 * n,), "float32")
    assert si(fn(t((2, 3)), op.const(1.0))) == TensorStructInfo((2, 3), "float32")


@pytest.mark.parametrize("fn", ELEMENTWISE)
def test_elementwise_with_unknown_shapes(fn) -> None:  # type: ignore[no-untyped-def]
    assert si(fn(t(None, ndim=3), t((2, 3)))) == TensorStructInfo(None, "float32", 3)
    assert si(fn(t(None), t((2, 3)))) == TensorStructInfo(None, "float32")
    # n against 4 could be 1 or 4 at run time: only the rank is known
    assert si(fn(t((n,)), t((2, 4)))) == TensorStructInfo(None, "float32", 2)
    assert si(fn(t((2,), ""), t((2,), "int8"))) == TensorStructInfo((2,), "int8")


@pytest.mark.parametrize(("fn", "name"), [(f, f.__name__) for f in ELEMENTWISE])
def test_elementwise_bad_input(fn, name: str) -> None:  # type: ignore[no-untyped-def]
    with raises(rf"R.{name}: expected shapes that broadcast, got \(2, 3\) and \(4,\)"):
        fn(t((2, 3)), t((4,)))
    with raises(rf"R.{name}: expected shapes that broadcast, got \(n \+ 1,\) and \(n,\)"):
        fn(t((n + 1,)), t((n,)))
    with raises(rf"R.{name}: expected operands of one dtype, got float16 and float32"):
        fn(t((2,)), t((2,), "float16"))
    with raises(rf"R.{name}: expected x2 to be a tensor, got R.Object"):
        fn(t((2,)), op.call_packed("get_item", op.prim_value(0)))


def test_matmul_shapes_follow_numpy() -> None:
    assert si(op.matmul(t((3, 4)), t((4, 5)))) == TensorStructInfo((3, 5), "float32")
    assert si(op.matmul(t((2, 1, n, 4)), t((7, 4, m)))) == TensorStructInfo((2, 7, n, m), "float32")
    assert si(op.matmul(t((4,)), t((4, 5)))) == TensorStructInfo((5,), "float32")
    assert si(op.matmul(t((3, 4)), t((4,)))) == TensorStructInfo((3,), "float32")
    assert si(op.matmul(t((4,)), t((4,)))) == TensorStructInfo((), "float32")
    assert si(op.matmul(t((6, 3, 4)), t((4,)))) == TensorStructInfo((6, 3), "float32")


def test_matmul_out_dtype() -> None:
    call = op.matmul(t((3, 4), "int8"), t((4, 5), "int8"), out_dtype="int32")
    assert call.attrs["out_dtype"] == "int32"
    assert si(call) == TensorStructInfo((3, 5), "int32")


def test_matmul_with_unknown_shapes() -> None:
    assert si(op.matmul(t(None, ndim=3), t((4, 5)))) == TensorStructInfo(None, "float32", 3)
    assert si(op.matmul(t(None, ndim=1), t(None, ndim=1))) == TensorStructInfo(None, "float32", 0)
    assert si(op.matmul(t(None), t((4, 5)))) == TensorStructInfo(None, "float32")
    assert si(op.matmul(t((3, n)), t((m, 5)))) == TensorStructInfo(None, "float32", 2)


def test_matmul_bad_input() -> None:
    with raises(r"R.matmul: expected the contracted dims to agree, got \(3, 4\) @ \(5, 6\)"):
        op.matmul(t((3, 4)), t((5, 6)))
    with raises(r"R.matmul: expected shapes that broadcast, got \(2,\) and \(3,\)"):
        op.matmul(t((2, 3, 4)), t((3, 4, 5)))
    with raises(r"R.matmul: expected x1 of rank >= 1, got a rank-0 tensor"):
        op.matmul(t(()), t((3,)))
    with raises(r"R.matmul: expected operands of one dtype, got float16 and float32"):
        op.matmul(t((3, 4)), t((4, 5), "float16"))
    with raises(r"R.matmul: expected out_dtype to be a dtype name, got 'int3'"):
        op.matmul(t((3, 4)), t((4, 5)), out_dtype="int3")
