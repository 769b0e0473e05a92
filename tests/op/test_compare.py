"""Inference and bad input of maximum / minimum, the comparisons, the logical ops and where."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.compare import COMPARISONS, LOGICAL
from tests.op.helpers import raises, si, t

n, m = PrimVar("n"), PrimVar("m")
EXTREMES = [op.maximum, op.minimum]
COMPARE = [getattr(op, name) for name in sorted(COMPARISONS)]
BOOLS = [getattr(op, name) for name in sorted(LOGICAL)]
OBJECT = op.call_packed("get_item", op.prim_value(0))


def test_the_mask_ops_are_spelled_as_in_relax() -> None:
    assert sorted(COMPARISONS) == [
        "equal",
        "greater",
        "greater_equal",
        "less",
        "less_equal",
        "not_equal",
    ]
    assert sorted(LOGICAL) == ["logical_and", "logical_or"]
    for fn in COMPARE + BOOLS + EXTREMES:
        assert op.call_op_name(fn(t((2,), "bool"), t((2,), "bool"))) == fn.__name__


@pytest.mark.parametrize("fn", EXTREMES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "uint32"])
def test_maximum_and_minimum_broadcast_in_the_operands_dtype(fn, dtype: str) -> None:  # type: ignore[no-untyped-def]
    assert si(fn(t((4, 1, 3), dtype), t((5, 1), dtype))) == TensorStructInfo((4, 5, 3), dtype)
    assert si(fn(t((1, m), dtype), t((n, 1), dtype))) == TensorStructInfo((n, m), dtype)
    assert si(fn(t(None, dtype, 3), t((2, 3), dtype))) == TensorStructInfo(None, dtype, 3)


@pytest.mark.parametrize("fn", EXTREMES, ids=lambda f: f.__name__)
def test_maximum_and_minimum_bad_input(fn) -> None:  # type: ignore[no-untyped-def]
    name = fn.__name__
    with raises(rf"R\.{name}: expected operands of one dtype, got float16 and float32"):
        fn(t((2,)), t((2,), "float16"))
    with raises(rf"R\.{name}: expected shapes that broadcast, got \(2, 3\) and \(4,\)"):
        fn(t((2, 3)), t((4,)))


@pytest.mark.parametrize("fn", COMPARE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool"])
def test_comparisons_give_bool_masks(fn, dtype: str) -> None:  # type: ignore[no-untyped-def]
    assert si(fn(t((4, 1, 3), dtype), t((5, 1), dtype))) == TensorStructInfo((4, 5, 3), "bool")
    assert si(fn(t((n, 4), dtype), t((4,), dtype))) == TensorStructInfo((n, 4), "bool")
    assert si(fn(t((n,), dtype), t((2, 4), dtype))) == TensorStructInfo(None, "bool", 2)
    assert si(fn(t(None, dtype), t((2,), dtype))) == TensorStructInfo(None, "bool")
    assert si(fn(t((2,), dtype), op.const(0, dtype))) == TensorStructInfo((2,), "bool")


@pytest.mark.parametrize("fn", COMPARE, ids=lambda f: f.__name__)
def test_comparisons_bad_input(fn) -> None:  # type: ignore[no-untyped-def]
    name = fn.__name__
    with raises(rf"R\.{name}: expected operands of one dtype, got float32 and int32"):
        fn(t((2,)), t((2,), "int32"))
    with raises(rf"R\.{name}: expected shapes that broadcast, got \(n \+ 1,\) and \(n,\)"):
        fn(t((n + 1,)), t((n,)))
    with raises(rf"R\.{name}: expected x1 to be a tensor, got R\.Object"):
        fn(OBJECT, t((2,)))


@pytest.mark.parametrize("fn", BOOLS, ids=lambda f: f.__name__)
def test_logical_ops_of_masks(fn) -> None:  # type: ignore[no-untyped-def]
    name = fn.__name__
    assert si(fn(t((3, 1), "bool"), t((4,), "bool"))) == TensorStructInfo((3, 4), "bool")
    assert si(fn(t((n,), "bool"), t((n,), "bool"))) == TensorStructInfo((n,), "bool")
    with raises(rf"R\.{name}: expected x1 of dtype bool, got float32"):
        fn(t((2,)), t((2,), "bool"))
    with raises(rf"R\.{name}: expected x2 of dtype bool, got int8"):
        fn(t((2,), "bool"), t((2,), "int8"))


def test_where_broadcasts_all_three() -> None:
    mask = t((4, 1, 1), "bool")
    assert si(op.where(mask, t((5, 1)), t((3,)))) == TensorStructInfo((4, 5, 3), "float32")
    assert si(op.where(t((n, 1), "bool"), t((m,), "int8"), t((1,), "int8"))) == TensorStructInfo(
        (n, m), "int8"
    )
    scalar = op.const(0.0, "float16")
    assert si(op.where(t((2,), "bool"), t((2,), "float16"), scalar)) == TensorStructInfo(
        (2,), "float16"
    )
    assert si(op.where(t(None, "bool", 2), t((3,)), t((3,)))) == TensorStructInfo(
        None, "float32", 2
    )


def test_where_bad_input() -> None:
    with raises(r"R\.where: expected condition of dtype bool, got float32"):
        op.where(t((2,)), t((2,)), t((2,)))
    with raises(r"R\.where: expected x1 and x2 of one dtype, got float16 and float32"):
        op.where(t((2,), "bool"), t((2,)), t((2,), "float16"))
    with raises(r"R\.where: expected shapes that broadcast, got \(2,\) and \(3,\)"):
        op.where(t((2,), "bool"), t((2,)), t((3,)))
    with raises(r"R\.where: expected shapes that broadcast, got \(2,\) and \(3,\)"):
        op.where(t((2,), "bool"), t((3,)), t((1,)))
    with raises(r"R\.where: expected condition to be a tensor, got R\.Object"):
        op.where(OBJECT, t((2,)), t((2,)))
    with raises(r"R\.where: expected 3 operands \(condition, x1, x2\), got 2"):
        op.where(t((2,), "bool"), t((2,)))
