"""Inference and bad input of permute_dims, reshape, expand_dims and astype."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.ir import Var
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import ObjectStructInfo, TensorStructInfo
from tests.op.helpers import raises, si, t

n, m = PrimVar("n"), PrimVar("m")


# permute_dims -----------------------------------------------------------------------------


def test_permute_dims_reverses_by_default() -> None:
    assert si(op.permute_dims(t((2, 3, 4)))) == TensorStructInfo((4, 3, 2), "float32")


def test_permute_dims_by_axes_static_symbolic_and_negative() -> None:
    assert si(op.permute_dims(t((n, 3, m)), axes=[2, 0, 1])) == TensorStructInfo(
        (m, n, 3), "float32"
    )
    call = op.permute_dims(t((2, 3)), axes=[-1, -2])
    assert call.attrs["axes"] == (-1, -2)
    assert si(call) == TensorStructInfo((3, 2), "float32")


def test_permute_dims_of_unknown_shape_or_rank() -> None:
    assert si(op.permute_dims(t(None, ndim=3))) == TensorStructInfo(None, "float32", 3)
    assert si(op.permute_dims(t(None), axes=[1, 0])) == TensorStructInfo(None, "float32", 2)
    assert si(op.permute_dims(t(None))) == TensorStructInfo(None, "float32")


def test_permute_dims_bad_input() -> None:
    with raises(r"R.permute_dims: expected 2 axes for a rank-2 tensor, got \[0\]"):
        op.permute_dims(t((2, 3)), axes=[0])
    with raises(r"R.permute_dims: expected axes in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.permute_dims(t((2, 3)), axes=[0, 2])
    with raises(r"R.permute_dims: expected distinct axes, got \[0, -2\]"):
        op.permute_dims(t((2, 3)), axes=[0, -2])
    with raises(r"R.permute_dims: expected x to be a tensor, got R.Object"):
        op.permute_dims(Var("o", ObjectStructInfo()))


# reshape ----------------------------------------------------------------------------------


def test_reshape_static_and_with_a_hole() -> None:
    x = t((2, 3, 4))
    assert si(op.reshape(x, [6, 4])) == TensorStructInfo((6, 4), "float32")
    assert si(op.reshape(x, [-1, 4])) == TensorStructInfo((6, 4), "float32")
    assert si(op.reshape(x, (2, -1))) == TensorStructInfo((2, 12), "float32")
    assert si(op.reshape(x, [-1])) == TensorStructInfo((24,), "float32")
    assert si(op.reshape(t((0, 3)), [3, 0])) == TensorStructInfo((3, 0), "float32")


def test_reshape_symbolic() -> None:
    x = t((n, 4, 8))
    assert si(op.reshape(x, [n, 32])) == TensorStructInfo((n, 32), "float32")
    assert si(op.reshape(x, [n, -1])) == TensorStructInfo((n, 32), "float32")
    assert si(op.reshape(x, [-1, 32])) == TensorStructInfo((n, 32), "float32")
    assert si(op.reshape(x, [-1])) == TensorStructInfo((n * 32,), "float32")
    assert si(op.reshape(x, [32 * n])) == TensorStructInfo((32 * n,), "float32")
    assert si(op.reshape(t((n, m)), [m, -1])) == TensorStructInfo((m, n), "float32")
    # the hole cannot be proven exact: it stays a floor division
    assert si(op.reshape(t((n, 6)), [4, -1])) == TensorStructInfo((4, n * 6 // 4), "float32")


def test_reshape_keeps_the_target_of_an_unknown_shape() -> None:
    assert si(op.reshape(t(None), [n, 4])) == TensorStructInfo((n, 4), "float32")
    assert si(op.reshape(t(None, ndim=2), [-1, 4])) == TensorStructInfo(None, "float32", 2)


def test_reshape_bad_input() -> None:
    with raises(r"R.reshape: expected a shape of 24 elements like \(2, 3, 4\), got \(5, 5\)"):
        op.reshape(t((2, 3, 4)), [5, 5])
    with raises(r"R.reshape: expected a shape of n \* 4 elements .* got \(n, 8\)"):
        op.reshape(t((n, 4)), [n, 8])
    with raises(r"R.reshape: expected a shape whose dims divide 15 elements .* got \(4, -1\)"):
        op.reshape(t((3, 5)), [4, -1])
    with raises(r"R.reshape: expected at most one -1 in the shape, got \(-1, -1\)"):
        op.reshape(t((3, 5)), [-1, -1])
    with raises(r"R.reshape: expected dims >= 0 or a single -1, got -3"):
        op.reshape(t((3, 5)), [-3, -5])
    with raises(r"R.reshape: expected the dims beside -1 to be non-zero, got \(0, -1\)"):
        op.reshape(t((0, 5)), [0, -1])
    with raises(r"R.reshape: expected shape dims of an integer dtype"):
        op.reshape(t((3, 5)), [PrimVar("f", "float32")])


# expand_dims ------------------------------------------------------------------------------


def test_expand_dims_one_and_several_axes() -> None:
    x = t((n, 4))
    assert si(op.expand_dims(x, 0)) == TensorStructInfo((1, n, 4), "float32")
    assert si(op.expand_dims(x, -1)) == TensorStructInfo((n, 4, 1), "float32")
    assert si(op.expand_dims(x, [0, 3])) == TensorStructInfo((1, n, 4, 1), "float32")
    assert si(op.expand_dims(t(None, ndim=2), 1)) == TensorStructInfo(None, "float32", 3)
    assert si(op.expand_dims(t(None), 1)) == TensorStructInfo(None, "float32")


def test_expand_dims_bad_input() -> None:
    with raises(r"R.expand_dims: expected axis in \[-3, 3\) for a rank-3 tensor, got 3"):
        op.expand_dims(t((2, 3)), 3)
    with raises(r"R.expand_dims: expected distinct axis, got \[0, -3\]"):
        op.expand_dims(t((2,)), [0, -3])


# astype -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int4", "float8_e4m3fn", "bool"])
def test_astype_keeps_the_shape(dtype: str) -> None:
    assert si(op.astype(t((n, 3)), dtype)) == TensorStructInfo((n, 3), dtype)
    assert si(op.astype(t(None, ndim=2), dtype)) == TensorStructInfo(None, dtype, 2)


def test_astype_canonicalises_an_alias() -> None:
    assert op.astype(t((2,)), "e4m3_float8").attrs["dtype"] == "float8_e4m3fn"


def test_astype_bad_input() -> None:
    with raises(r"R.astype: expected dtype to be a dtype name, got 'float128'"):
        op.astype(t((2,)), "float128")
    with raises(r"R.astype: expected x to be a tensor, got R.Tuple$"):
        op.astype(op.kill_object(t((2,))), "float16")
