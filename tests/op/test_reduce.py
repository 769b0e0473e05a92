"""Inference, attrs and bad input of the reductions sum, max, min and mean."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams import op
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.reduce import REDUCTIONS
from tests.op.helpers import raises, si, t

n, m = PrimVar("n"), PrimVar("m")
NAMES = sorted(REDUCTIONS)
FNS = {name: getattr(op, name) for name in NAMES}


def test_the_reductions_are_spelled_as_in_relax() -> None:
    assert NAMES == ["max", "mean", "min", "sum"]
    for name, fn in FNS.items():
        assert fn.__name__ == name and f"R.{name}(x, axis=None, keepdims=False)" in fn.__doc__


@pytest.mark.parametrize("name", NAMES)
def test_axis_is_kept_as_relax_prints_it(name: str) -> None:
    fn = FNS[name]
    assert fn(t((2, 3))).attrs == {"axis": None, "keepdims": False}
    assert fn(t((2, 3)), axis=1).attrs == {"axis": (1,), "keepdims": False}
    assert fn(t((2, 3)), [-1, 0], True).attrs == {"axis": (-1, 0), "keepdims": True}
    assert fn(t((2, 3)), 1, np.True_).attrs == {"axis": (1,), "keepdims": True}


@pytest.mark.parametrize("name", NAMES)
def test_shapes_of_reductions(name: str) -> None:
    fn = FNS[name]
    x = t((4, n, 3))
    assert si(fn(x)) == TensorStructInfo((), "float32")
    assert si(fn(x, keepdims=True)) == TensorStructInfo((1, 1, 1), "float32")
    assert si(fn(x, axis=1)) == TensorStructInfo((4, 3), "float32")
    assert si(fn(x, axis=[-1, 0])) == TensorStructInfo((n,), "float32")
    assert si(fn(x, axis=[2, 0], keepdims=True)) == TensorStructInfo((1, n, 1), "float32")
    assert si(fn(x, axis=[])) == TensorStructInfo((4, n, 3), "float32")
    assert si(fn(t((n * m, 2)), axis=1)) == TensorStructInfo((n * m,), "float32")
    assert si(fn(t((), "float16"))) == TensorStructInfo((), "float16")


@pytest.mark.parametrize("name", NAMES)
def test_reductions_with_unknown_shapes(name: str) -> None:
    fn = FNS[name]
    assert si(fn(t(None, ndim=3), axis=0)) == TensorStructInfo(None, "float32", 2)
    assert si(fn(t(None, ndim=3), axis=0, keepdims=True)) == TensorStructInfo(None, "float32", 3)
    assert si(fn(t(None))) == TensorStructInfo(None, "float32", 0)
    assert si(fn(t(None), axis=0)) == TensorStructInfo(None, "float32")
    assert si(fn(t(None), keepdims=True)) == TensorStructInfo(None, "float32")
    assert si(fn(t((2,), ""))) == TensorStructInfo((), "")
    assert IntImm(1) in si(fn(t((n, 2)), axis=0, keepdims=True)).shape  # type: ignore[attr-defined, operator]


@pytest.mark.parametrize("name", ["sum", "max", "min"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "bfloat16", "float64"])
def test_sum_max_min_keep_int_and_float_dtypes(name: str, dtype: str) -> None:
    assert si(FNS[name](t((2, 3), dtype), axis=0)) == TensorStructInfo((3,), dtype)


@pytest.mark.parametrize("name", NAMES)
def test_reduction_bad_input(name: str) -> None:
    fn = FNS[name]
    with raises(rf"R\.{name}: expected axis in \[-2, 2\) for a rank-2 tensor, got 2"):
        fn(t((2, 3)), axis=2)
    with raises(rf"R\.{name}: expected distinct axis, got \[1, -1\]"):
        fn(t((2, 3)), axis=[1, -1])
    with raises(rf"R\.{name}: expected axis to be an int, got 1.5"):
        fn(t((2, 3)), axis=1.5)
    with raises(rf"R\.{name}: expected keepdims to be True or False, got 1"):
        fn(t((2, 3)), keepdims=1)
    with raises(rf"R\.{name}: expected x to be a tensor, got R\.Object"):
        fn(op.call_packed("get_item", op.prim_value(0)))
    with raises(rf"R\.{name}: expected x of an? [a-z ]*float dtype, got bool"):
        fn(t((2,), "bool"))


def test_mean_takes_float_tensors_only() -> None:
    with raises(r"R\.mean: expected x of a float dtype, got int32"):
        op.mean(t((2,), "int32"))
    with raises(r"R\.sum: expected x of an int or float dtype, got bool"):
        op.sum(t((2,), "bool"))
