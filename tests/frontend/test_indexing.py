"""Indexing traced tensors: every supported key gives numpy's result, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyparams.frontend import trace
from lazyparams.ir import Call

SHAPE = (4, 5, 6)


def arrays() -> dict[str, np.ndarray]:
    return {"t": np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE) - 50.0}


KEYS: list[Any] = [
    0,
    -1,
    (1, 2),
    (1, 2, 3),
    (-4, -5, -6),
    slice(1, 3),
    (slice(None), slice(1, None, 2)),
    (slice(None, None, -1),),
    (slice(None), slice(None, None, -2), slice(4, 0, -1)),
    (slice(3, None, -1), 0),
    (slice(-2, None), Ellipsis, slice(None, -1)),
    (Ellipsis, 2),
    (0, Ellipsis),
    (None, 1),
    (slice(None), None, 2, None),
    (Ellipsis, None),
    (slice(10, 20),),
    (slice(-20, 20, 3),),
    (slice(5, 1),),
    [2, 0],
    np.array([[1, 3], [0, 0]]),
    (slice(None), [4, -1, 0]),
    (0, [1, 2]),
    ([1, 2], 0),
    (slice(1, 3), Ellipsis, [5, 5, 0]),
    (np.int64(1), np.int32(-1)),
    (slice(np.int64(1), None),),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_index_matches_numpy(key: Any, check: Any) -> None:
    check(lambda p: {"y": p["t"][key]}, arrays())


def test_an_index_tensor_gathers(check: Any) -> None:
    data = arrays() | {"idx": np.array([3, 0, 3], dtype=np.int64)}
    check(lambda p: {"y": p["t"][:, p["idx"]], "z": p["t"][p["idx"]]}, data)


def test_a_key_binds_at_most_one_slice_one_gather_and_one_reshape() -> None:
    mod = trace(lambda p: {"y": p["t"][None, ::2, 1, [3, 4]]}, {"t": (SHAPE, "float32")})
    calls = [
        b.value.op.name for b in mod["transform_params"].bindings() if isinstance(b.value, Call)
    ]
    assert calls == ["strided_slice", "take", "reshape"]


def _slice(dim: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-dim - 2, dim + 2)
    step = st.none() | st.sampled_from([1, 2, 3, -1, -2, -4])
    return st.builds(slice, bound, bound, step)


def _entry(dim: int) -> st.SearchStrategy[Any]:
    return st.integers(-dim, dim - 1) | _slice(dim)


@st.composite
def basic_keys(draw: Any) -> tuple[Any, ...]:
    count = draw(st.integers(0, len(SHAPE)))
    key: list[Any] = [draw(_entry(dim)) for dim in SHAPE[:count]]
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), Ellipsis)
    return tuple(key)


@settings(max_examples=60, deadline=None)
@given(key=basic_keys())
def test_random_basic_keys_match_numpy(key: tuple[Any, ...], check: Any) -> None:
    check(lambda p: {"y": p["t"][key]}, arrays(), lazy=False)
