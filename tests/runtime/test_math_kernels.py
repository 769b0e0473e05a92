"""The math kernels against numpy on the operand's own dtype: the unary functions, maximum and
minimum, comparisons, logical ops, where and the reductions."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.errors import RuntimeExecError
from lazyparams.op.compare import COMPARISONS, LOGICAL
from lazyparams.op.reduce import REDUCTIONS
from lazyparams.op.unary import UNARY
from lazyparams.runtime import run_kernel

RNG = np.random.default_rng(11)
FLOATS = [
    np.float16,
    np.float32,
    np.float64,
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e5m2,
]
NUMPY_NAME = {"acos": "arccos"}
"""Ops whose numpy ufunc is spelled otherwise."""


def _floats(dtype: Any, *shape: int) -> np.ndarray:
    """Normal values with the awkward ones among them: signed zeros, infinities, NaN, +-1."""
    x = (RNG.standard_normal(shape) * 3).astype(np.float32).reshape(-1)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])[: x.size]
    x[: special.size] = special
    return x.reshape(shape).astype(dtype)


def _numbers(dtype: Any, *shape: int) -> np.ndarray:
    """Finite values that every dtype holds (bools: mostly True)."""
    return np.abs(RNG.standard_normal(shape) * 4).round().astype(dtype)


def _bits_equal(got: Any, want: Any) -> None:
    """Same type, dtype, shape and bytes (NaN payloads and the signs of zeros included)."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    assert got.tobytes() == want.tobytes(), f"{got} != {want}"


# Elementwise --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_unary_kernels_are_numpy_on_the_dtype(name: str, dtype: Any) -> None:
    x = _floats(dtype, 5, 8)
    ufunc = getattr(np, NUMPY_NAME.get(name, name))
    with np.errstate(all="ignore"):
        want = ufunc(x)
    _bits_equal(run_kernel(name, [x], {}), want)
    _bits_equal(run_kernel(name, [x[0, 0]], {}), want[0, 0])  # a 0-d operand gives a 0-d array


def test_unary_kernels_keep_ieee_results() -> None:
    x = np.array([-0.0, 0.0, -1.0, 4.0], np.float32)
    _bits_equal(run_kernel("negative", [x], {}), np.array([0.0, -0.0, 1.0, -4.0], np.float32))
    _bits_equal(run_kernel("sign", [x], {}), np.array([0.0, 0.0, -1.0, 1.0], np.float32))
    assert np.isnan(run_kernel("sqrt", [x], {})[2])
    assert run_kernel("log", [x], {})[0] == -np.inf


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_kernels_refuse_ints(name: str) -> None:
    with pytest.raises(
        RuntimeExecError, match=rf"R\.{name}: expected x of a float dtype, got int32"
    ):
        run_kernel(name, [np.arange(3, dtype=np.int32)], {})


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int8, np.uint16])
def test_maximum_and_minimum(name: str, dtype: Any) -> None:
    a, b = _numbers(dtype, 3, 1, 4), _numbers(dtype, 5, 1)
    _bits_equal(run_kernel(name, [a, b], {}), getattr(np, name)(a, b))
    nan = np.array([np.nan, 1.0], np.float32)
    assert np.isnan(run_kernel(name, [nan, np.float32([2.0, np.nan])], {})).all()


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.bool_])
def test_comparisons_give_numpy_masks(name: str, dtype: Any) -> None:
    a, b = _numbers(dtype, 4, 1, 3), _numbers(dtype, 5, 1)
    _bits_equal(run_kernel(name, [a, b], {}), getattr(np, name)(a, b))
    nan = np.float32([np.nan])
    assert run_kernel(name, [nan, nan], {})[0] == (name == "not_equal")


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_kernels(name: str) -> None:
    a, b = np.array([[True], [False]]), np.array([True, False, True])
    _bits_equal(run_kernel(name, [a, b], {}), getattr(np, name)(a, b))
    with pytest.raises(RuntimeExecError, match=rf"R\.{name}: expected x2 of dtype bool, got int8"):
        run_kernel(name, [a, np.int8([1, 0, 1])], {})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int64])
def test_where_broadcasts_all_three(dtype: Any) -> None:
    condition = RNG.random((4, 1, 3)) > 0.5
    a, b = _numbers(dtype, 5, 1), _numbers(dtype, 3)
    _bits_equal(run_kernel("where", [condition, a, b], {}), np.where(condition, a, b))


def test_where_bad_operands() -> None:
    x = np.zeros(2, np.float32)
    with pytest.raises(RuntimeExecError, match=r"R\.where: expected condition of dtype bool"):
        run_kernel("where", [x, x, x], {})
    with pytest.raises(RuntimeExecError, match="expected operands of one dtype"):
        run_kernel("where", [x > 0, x, x.astype(np.float16)], {})
    with pytest.raises(RuntimeExecError, match=r"R\.greater: .*expected operands of one dtype"):
        run_kernel("greater", [x, x.astype(np.float16)], {})


# Reductions ---------------------------------------------------------------------------------


def _oracle(name: str, x: np.ndarray, axis: Any, keepdims: bool) -> Any:
    """numpy's reduction in x's dtype, as the op promises."""
    if name in ("sum", "mean"):
        return getattr(np, name)(x, axis=axis, dtype=x.dtype, keepdims=keepdims)
    return getattr(np, name)(x, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int32]
)
@pytest.mark.parametrize("axis", [None, (1,), (-1, 0), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_are_numpy_in_the_dtype(
    name: str, dtype: Any, axis: Any, keepdims: bool
) -> None:
    if name == "mean" and dtype is np.int32:
        pytest.skip("R.mean takes float tensors only")
    x = (RNG.standard_normal((3, 4, 5)) * 4).astype(dtype)
    want = _oracle(name, x, axis, keepdims)
    _bits_equal(run_kernel(name, [x], {"axis": axis, "keepdims": keepdims}), want)


def test_sum_orders_and_rounds_as_numpy_does() -> None:
    """float16 keeps float32 partial sums in numpy's loop; bfloat16 rounds each partial sum,
    so 4096 ones stop growing at 256."""
    ones = np.ones(4096, np.float16)
    _bits_equal(run_kernel("sum", [ones], {"axis": None}), np.float16(4096))
    bf16 = ones.astype(ml_dtypes.bfloat16)
    _bits_equal(run_kernel("sum", [bf16], {"axis": None}), np.asarray(256, bf16.dtype))
    ints = np.full(300, 100, np.int8)
    _bits_equal(run_kernel("sum", [ints], {"axis": (0,)}), np.sum(ints, dtype=np.int8))


def test_reductions_of_nothing() -> None:
    empty = np.zeros((0, 3), np.float32)
    _bits_equal(run_kernel("sum", [empty], {"axis": (0,)}), np.zeros(3, np.float32))
    assert np.isnan(run_kernel("mean", [empty], {"axis": (0,)})).all()  # and no warning
    with pytest.raises(RuntimeExecError, match=r"R\.max: zero-size array"):
        run_kernel("max", [empty], {"axis": (0,)})


def test_results_never_share_memory_with_operands() -> None:
    x = _floats(np.float32, 4, 3)
    cases = [("abs", [x]), ("where", [x > 0, x, x]), ("max", [x]), ("sum", [x[:1]])]
    for name, operands in cases:
        result = run_kernel(name, operands, {})
        assert not any(np.may_share_memory(result, a) for a in operands), name
