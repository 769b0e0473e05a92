"""Fixtures for the checkpoint-format tests: sample tensors of every dtype, exact comparison."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.errors import LazyParamsError
from lazyparams.io import numpy_dtype
from tests.fuzz.worker import OBJECT_REPR

SHAPES = [(3, 4), (), (0, 5), (2, 1, 3)]


@pytest.fixture(autouse=True)
def _messages_show_no_object_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every error these tests provoke is checked as it is made: its message says what is
    wrong in our words, never with an object's repr (`<ast.Name object at 0x...>`)."""

    def checked(self: LazyParamsError, *args: object) -> None:
        message = " ".join(str(arg) for arg in args)
        assert not OBJECT_REPR.search(message), f"an object's repr in an error: {message}"
        Exception.__init__(self, *args)

    monkeypatch.setattr(LazyParamsError, "__init__", checked)


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A deterministic array of `dtype` with varied, finite values."""
    rng = np.random.default_rng(seed)
    target = numpy_dtype(dtype)
    if dtype == "bool":
        values = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype == "int4":
        values = rng.integers(-8, 8, size=shape).astype(ml_dtypes.int4)
    elif np.issubdtype(target, np.integer):
        info = np.iinfo(target)
        values = rng.integers(info.min, info.max, size=shape, dtype=target, endpoint=True)
    else:
        values = (rng.standard_normal(size=shape) * 4).astype(target)
    return np.asarray(values)  # 0-d draws come back as scalars


def sample_tensors(dtypes: Iterable[str], seed: int = 0) -> dict[str, np.ndarray]:
    """One tensor per dtype and shape, named like model weights."""
    tensors = {}
    for i, dtype in enumerate(dtypes):
        for j, shape in enumerate(SHAPES):
            tensors[f"layers.{i}.{dtype}.w{j}"] = sample(dtype, shape, seed + 10 * i + j)
    return tensors


def bits(array: Any) -> np.ndarray:
    """The raw bits of an array, for exact comparison of any dtype (NaNs included)."""
    array = np.ascontiguousarray(array)
    return array.reshape(-1).view(np.uint8).reshape((*array.shape, array.dtype.itemsize))


def assert_same(got: Any, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(bits(got), bits(want))


@pytest.fixture(name="make_tensors")
def make_tensors_fixture() -> Callable[..., dict[str, np.ndarray]]:
    """`make_tensors(dtypes, seed=0)`: one tensor per dtype and shape."""
    return sample_tensors


@pytest.fixture(name="assert_same")
def assert_same_fixture() -> Callable[[Any, np.ndarray], None]:
    """`assert_same(got, want)`: equal dtype, shape and bits."""
    return assert_same
