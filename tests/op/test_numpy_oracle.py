"""Static shape inference against numpy itself: same shape when numpy succeeds, an error when not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.errors import StructInfoError
from lazyparams.ir import Call, Var, struct_info_of
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo

FAST = settings(max_examples=60, deadline=None)
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple)


def var(shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var("x", TensorStructInfo(shape, dtype))


def static(sinfo: object) -> object:
    if isinstance(sinfo, TupleStructInfo):
        return [static(f) for f in sinfo.fields]
    assert isinstance(sinfo, TensorStructInfo)
    return sinfo.static_shape


def agree(build: Callable[[], Call], oracle: Callable[[], Any]) -> None:
    """Either both fail, or the inferred static shape is numpy's."""
    try:
        expected = oracle()
    except (ValueError, IndexError, TypeError):
        try:
            build()
        except StructInfoError:
            return
        raise AssertionError("numpy refused this call but inference accepted it") from None
    if isinstance(expected, list):
        assert static(struct_info_of(build())) == [a.shape for a in expected]
    else:
        assert static(struct_info_of(build())) == expected.shape


@FAST
@given(shapes, shapes)
def test_broadcasting(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    agree(lambda: op.add(var(a), var(b)), lambda: np.zeros(a) + np.zeros(b))


@FAST
@given(shapes, shapes, shapes)
def test_where_broadcasts_three(c: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]) -> None:
    agree(
        lambda: op.where(var(c, "bool"), var(a), var(b)),
        lambda: np.where(np.zeros(c, bool), np.zeros(a), np.zeros(b)),
    )


axes = st.none() | st.integers(-5, 4) | st.lists(st.integers(-5, 4), max_size=3)


@FAST
@given(shapes, axes, st.booleans(), st.sampled_from(["sum", "max", "min", "mean"]))
def test_reductions(shape: tuple[int, ...], axis: Any, keepdims: bool, name: str) -> None:
    # np.sum's shapes for all four: max and min refuse an empty slice at run time only
    numpy_axis = tuple(axis) if isinstance(axis, list) else axis

    def oracle() -> Any:
        if shape == () and isinstance(axis, int):
            raise ValueError("numpy's old leniency (axis 0 or -1 of a 0-d array) is refused")
        return np.sum(np.zeros(shape), axis=numpy_axis, keepdims=keepdims)

    agree(lambda: getattr(op, name)(var(shape), axis, keepdims), oracle)


@FAST
@given(shapes, shapes)
def test_matmul(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    agree(lambda: op.matmul(var(a), var(b)), lambda: np.matmul(np.zeros(a), np.zeros(b)))


@FAST
@given(nonempty_shapes, st.data())
def test_permute_dims(shape: tuple[int, ...], data: st.DataObject) -> None:
    axes = data.draw(st.permutations(range(-len(shape), 0)))
    agree(lambda: op.permute_dims(var(shape), axes), lambda: np.transpose(np.zeros(shape), axes))


@FAST
@given(shapes, st.lists(st.integers(-1, 6), max_size=4))
def test_reshape(shape: tuple[int, ...], target: list[int]) -> None:
    agree(lambda: op.reshape(var(shape), target), lambda: np.zeros(shape).reshape(target))


@FAST
@given(shapes, st.lists(st.integers(-6, 5), min_size=1, max_size=3))
def test_expand_dims(shape: tuple[int, ...], axes: list[int]) -> None:
    agree(
        lambda: op.expand_dims(var(shape), axes),
        lambda: np.expand_dims(np.zeros(shape), tuple(axes)),
    )


@FAST
@given(nonempty_shapes, st.integers(1, 3), st.integers(-4, 4), st.data())
def test_concat(shape: tuple[int, ...], count: int, axis: int, data: st.DataObject) -> None:
    others = [
        data.draw(st.sampled_from([shape, (*shape[:-1], 2), (3, *shape)])) for _ in range(count)
    ]
    agree(
        lambda: op.concat([var(s) for s in others], axis=axis),
        lambda: np.concatenate([np.zeros(s) for s in others], axis=axis),
    )


@FAST
@given(
    nonempty_shapes,
    st.integers(1, 4) | st.lists(st.integers(-6, 6), max_size=3),
    st.integers(-4, 3),
)
def test_split(shape: tuple[int, ...], spec: Any, axis: int) -> None:
    agree(
        lambda: op.split(var(shape), spec, axis=axis),
        lambda: list(np.split(np.zeros(shape), spec, axis=axis)),
    )


@FAST
@given(
    nonempty_shapes, st.integers(-4, 3), st.integers(-6, 6), st.integers(-6, 6), st.integers(-3, 3)
)
def test_strided_slice(
    shape: tuple[int, ...], axis: int, begin: int, end: int, stride: int
) -> None:
    def oracle() -> Any:
        if stride == 0 or not -len(shape) <= axis < len(shape):
            raise ValueError("numpy has no such slice")
        index = [slice(None)] * len(shape)
        index[axis] = slice(begin, end, stride)
        return np.zeros(shape)[tuple(index)]

    agree(lambda: op.strided_slice(var(shape), [axis], [begin], [end], [stride]), oracle)


positive_shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


@FAST
@given(positive_shapes, shapes, st.none() | st.integers(-4, 3))
def test_take(shape: tuple[int, ...], idx_shape: tuple[int, ...], axis: int | None) -> None:
    indices = np.zeros(idx_shape, np.int64)

    def oracle() -> Any:
        if axis is not None and not -len(shape) <= axis < len(shape):
            raise IndexError("axis out of range")
        return np.take(np.ones(shape), indices, axis=axis, mode="clip")

    agree(lambda: op.take(var(shape), var(idx_shape, "int64"), axis=axis), oracle)
