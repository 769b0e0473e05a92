"""`R.layout_cast`: the joined shape permuted, in the target dtype; bad operands refused."""

from __future__ import annotations

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from tests.op.helpers import raises, si, t

n = PrimVar("n")


def test_the_result_is_the_permuted_join_in_the_new_dtype() -> None:
    call = op.layout_cast([t((2, 4)), t((3, 4), "float16")], axes=(1, 0), dtype="bfloat16")
    assert si(call) == TensorStructInfo((4, 5), "bfloat16")
    one = op.layout_cast(t((2, 3, 4)), axes=(2, 0, 1), dtype="float16")
    assert si(one) == TensorStructInfo((4, 2, 3), "float16")
    sym = op.layout_cast([t((n, 8)), t((n, 8))], axes=(-1, 0), dtype="float16")
    assert si(sym) == TensorStructInfo((8, n * 2), "float16")
    assert si(op.layout_cast(t(None, ndim=2), axes=(1, 0), dtype="float16")) == TensorStructInfo(
        None, "float16", 2
    )


def test_bad_operands_and_attrs_are_refused() -> None:
    with raises("dims off axis 0 agree"):
        op.layout_cast([t((2, 4)), t((3, 5))], axes=(0, 1), dtype="float16")
    with raises("expected 2 axes"):
        op.layout_cast(t((2, 4)), axes=(0, 1, 2), dtype="float16")
    with raises("one rank"):
        op.layout_cast([t((2, 4)), t((2, 4, 1))], axes=(0, 1), dtype="float16")
    with raises("block type"):
        op.layout_cast(t((2, 32)), axes=(0, 1), dtype="q8_0")
    with raises("empty tuple"):
        op.layout_cast([], axes=(0,), dtype="float16")
    with raises("axis"):
        op.layout_cast(t((2, 4)), axes=(0, 1), dtype="float16", axis=2)
