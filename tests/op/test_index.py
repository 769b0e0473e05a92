"""Inference and bad input of concat, split, strided_slice and take."""

from __future__ import annotations

from lazyparams import op
from lazyparams.ir import Tuple, Var
from lazyparams.ir.prim import IntImm, Max, Min, PrimVar
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo
from tests.op.helpers import raises, si, t, tensors

n, m = PrimVar("n"), PrimVar("m")


# concat -----------------------------------------------------------------------------------


def test_concat_sums_the_axis() -> None:
    assert si(op.concat([t((2, 4)), t((3, 4))])) == TensorStructInfo((5, 4), "float32")
    assert si(op.concat((t((2, 4)), t((2, 1))), axis=-1)) == TensorStructInfo((2, 5), "float32")


def test_concat_symbolic_dims_are_summed_and_simplified() -> None:
    q, k, v = t((n, 64)), t((n, 64)), t((n, 64))
    assert si(op.concat([q, k, v])) == TensorStructInfo((n * 3, 64), "float32")
    assert si(op.concat([t((n, 4)), t((m, 4)), t((2, 4))])) == TensorStructInfo(
        (n + m + 2, 4), "float32"
    )
    assert si(op.concat([t((4, n)), t((4, n))], axis=1)) == TensorStructInfo((4, n * 2), "float32")


def test_concat_of_a_tuple_typed_var() -> None:
    pair = Var("pair", tensors((2, 3), (2, 3)))
    call = op.concat(pair, axis=1)
    assert call.args == (pair,)
    assert si(call) == TensorStructInfo((2, 6), "float32")
    assert isinstance(op.concat([t((1,))]).args[0], Tuple)


def test_concat_with_unknown_shapes() -> None:
    assert si(op.concat([t(None, ndim=2), t((2, 3))])) == TensorStructInfo(None, "float32", 2)
    assert si(op.concat([t(None), t(None)])) == TensorStructInfo(None, "float32")
    # off-axis dims that cannot be proven equal leave only the rank known
    assert si(op.concat([t((n, 4)), t((m, 4))], axis=1)) == TensorStructInfo(None, "float32", 2)


def test_concat_bad_input() -> None:
    with raises(r"R.concat: expected tensors whose dims off axis 0 agree, got 4 and 5 on axis 1"):
        op.concat([t((2, 4)), t((2, 5))])
    with raises(r"R.concat: expected tensors of one dtype, got float16 and float32"):
        op.concat([t((2, 4)), t((2, 4), "float16")])
    with raises(r"R.concat: expected tensors of one rank, got ranks \[1, 2\]"):
        op.concat([t((2, 4)), t((2,))])
    with raises(r"R.concat: expected axis in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.concat([t((2, 4))], axis=2)
    with raises(r"R.concat: expected at least one tensor, got an empty tuple"):
        op.concat([])
    with raises(r"R.concat: expected tensors to be a tuple of tensors, got R.Tensor\(\(2,\)"):
        op.concat(t((2,)))
    with raises(
        r"R.concat: expected tensors\[1\] to be a tensor, got R.Prim\(\"int64\", value=1\)"
    ):
        op.concat([t((2,)), op.prim_value(1)])
    with raises(r"R.concat: expected axis in \[0, 0\) for a rank-0 tensor, got 0"):
        op.concat([t(()), t(())])


# split ------------------------------------------------------------------------------------


def test_split_into_sections() -> None:
    assert si(op.split(t((6, 4)), 3)) == tensors((2, 4), (2, 4), (2, 4))
    assert si(op.split(t((n * 4, 8)), 2)) == tensors((n * 2, 8), (n * 2, 8))
    assert si(op.split(t((n, 8)), 2)) == tensors((n // 2, 8), (n // 2, 8))
    assert si(op.split(t((5, 4)), 1)) == tensors((5, 4))


def test_split_at_indices_follows_numpy() -> None:
    assert si(op.split(t((4, 10)), [3, 7], axis=1)) == tensors((4, 3), (4, 4), (4, 3))
    assert si(op.split(t((10,)), [3, 20])) == tensors((3,), (7,), (0,))
    assert si(op.split(t((10,)), [-4])) == tensors((6,), (4,))
    assert si(op.split(t((10,)), [])) == tensors((10,))
    assert si(op.split(t((n, 2)), [3, 5])) == tensors((3, 2), (2, 2), (n - 5, 2))


def test_split_with_unknown_shape_or_rank() -> None:
    assert si(op.split(t(None, ndim=2), 2, axis=1)) == TupleStructInfo(
        (TensorStructInfo(None, "float32", 2),) * 2
    )
    assert si(op.split(t(None), [1, 2])) == TupleStructInfo(
        (TensorStructInfo(None, "float32"),) * 3
    )


def test_split_bad_input() -> None:
    with raises(r"R.split: expected 4 sections to divide the axis dim, got dim 6"):
        op.split(t((6, 4)), 4)
    with raises(r"R.split: expected a positive number of sections, got 0"):
        op.split(t((6, 4)), 0)
    with raises(r"R.split: expected axis in \[-2, 2\) for a rank-2 tensor, got -3"):
        op.split(t((6, 4)), 2, axis=-3)
    with raises(r"R.split: expected non-negative indices on the symbolic axis n, got \[-1\]"):
        op.split(t((n,)), [-1])


# strided_slice ----------------------------------------------------------------------------


def test_strided_slice_static_follows_numpy() -> None:
    x = t((10, 8))
    assert si(op.strided_slice(x, [0], [2], [7])) == TensorStructInfo((5, 8), "float32")
    assert si(op.strided_slice(x, [1, 0], [1, -3], [100, -1])) == TensorStructInfo(
        (2, 7), "float32"
    )
    assert si(op.strided_slice(x, [0], [9], [-100], [-3])) == TensorStructInfo((4, 8), "float32")
    assert si(op.strided_slice(x, [0], [5], [2])) == TensorStructInfo((0, 8), "float32")


def test_strided_slice_symbolic_takes_bounds_inside_the_axis() -> None:
    x = t((n, 8))
    assert si(op.strided_slice(x, [0], [1], [-1])) == TensorStructInfo((n - 2, 8), "float32")
    assert si(op.strided_slice(x, [0], [2], [2**31 - 1])) == TensorStructInfo((n - 2, 8), "float32")
    assert si(op.strided_slice(x, [0], [0], [4])) == TensorStructInfo((4, 8), "float32")
    assert si(op.strided_slice(x, [0], [0], [2**31 - 1], [2])) == TensorStructInfo(
        ((n + 1) // 2, 8), "float32"
    )
    assert si(op.strided_slice(x, [0], [2**31 - 1], [-(2**31)], [-1])) == TensorStructInfo(
        (n, 8), "float32"
    )


def test_strided_slice_symbolic_bounds_clamp_as_numpy_does() -> None:
    """TVM's `begin=[k]`: a symbolic bound is clamped into the axis by T.min / T.max."""
    k = PrimVar("k")
    x = t((n, 8))
    assert si(op.strided_slice(x, [0], [k], [k + 2])) == TensorStructInfo(
        (Min(k + 2, n) - Min(k, n), 8), "float32"
    )
    assert si(op.strided_slice(x, [0], [0], [k])) == TensorStructInfo((Min(k, n), 8), "float32")
    assert si(op.strided_slice(t((10, 8)), [0], [k], [10])) == TensorStructInfo(
        (Max(10 - Min(k, IntImm(10)), IntImm(0)), 8), "float32"
    )
    maybe_negative = si(op.strided_slice(x, [0], [n - 2], [n])).shape[0]  # type: ignore[index]
    assert isinstance(maybe_negative, Max)  # counted from the end if below zero: a select
    assert "Select" in repr(maybe_negative)


def test_strided_slice_static_bounds_written_as_prims_are_ints() -> None:
    call = op.strided_slice(t((10, 8)), [0], [IntImm(2)], [IntImm(7)])
    assert call.attrs["begin"] == (2,) and call.attrs["end"] == (7,)


def test_strided_slice_refuses_float_bounds() -> None:
    with raises(r"R.strided_slice: expected begin of an integer dtype, got x: float32"):
        op.strided_slice(t((10, 8)), [0], [PrimVar("x", "float32")], [7])


def test_strided_slice_with_unknown_shape_or_rank() -> None:
    assert si(op.strided_slice(t(None, ndim=2), [1], [0], [1])) == TensorStructInfo(
        None, "float32", 2
    )
    assert si(op.strided_slice(t(None), [5], [0], [1])) == TensorStructInfo(None, "float32")


def test_strided_slice_bad_input() -> None:
    x = t((10, 8))
    with raises(r"R.strided_slice: expected end of the same length as axes \(1\), got \[1, 2\]"):
        op.strided_slice(x, [0], [0], [1, 2])
    with raises(r"R.strided_slice: expected strides of the same length as axes \(1\), got \[\]"):
        op.strided_slice(x, [0], [0], [1], [])
    with raises(r"R.strided_slice: expected non-zero strides, got \[0\]"):
        op.strided_slice(x, [0], [0], [1], [0])
    with raises(r"R.strided_slice: expected axes in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.strided_slice(x, [2], [0], [1])
    with raises(r"R.strided_slice: expected distinct axes, got \[0, -2\]"):
        op.strided_slice(x, [0, -2], [0, 0], [1, 1])


# take -------------------------------------------------------------------------------------


def test_take_along_an_axis() -> None:
    x, idx = t((n, 4, 8)), t((5, 2), "int64")
    assert si(op.take(x, idx, axis=1)) == TensorStructInfo((n, 5, 2, 8), "float32")
    assert si(op.take(x, idx, axis=-1)) == TensorStructInfo((n, 4, 5, 2), "float32")
    assert si(op.take(x, t((), "int32"), axis=0)) == TensorStructInfo((4, 8), "float32")


def test_take_without_axis_flattens() -> None:
    assert si(op.take(t((3, 4)), t((m,), "int32"))) == TensorStructInfo((m,), "float32")


def test_take_with_unknown_shapes() -> None:
    idx = t(None, "int64", ndim=2)
    assert si(op.take(t((3, 4)), idx, axis=0)) == TensorStructInfo(None, "float32", 3)
    assert si(op.take(t(None), t((2,), "int64"), axis=0)) == TensorStructInfo(None, "float32")
    assert si(op.take(t((3, 4)), t(None, "int64"), axis=0)) == TensorStructInfo(None, "float32")


def test_take_bad_input() -> None:
    with raises(
        r"R.take: expected indices of an integer dtype, got R.Tensor\(\(2,\), \"float32\"\)"
    ):
        op.take(t((3, 4)), t((2,)), axis=0)
    with raises(r"R.take: expected axis in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.take(t((3, 4)), t((2,), "int64"), axis=2)
    with raises(r"R.take: expected indices to be a tensor, got R.Prim"):
        op.take(t((3, 4)), op.prim_value(1), axis=0)
