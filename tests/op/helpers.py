"""Shorthands the op tests share: typed vars, inferred struct info, expected op errors."""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest

from lazyparams.errors import StructInfoError
from lazyparams.ir import Var, struct_info_of
from lazyparams.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo


def t(shape: tuple[object, ...] | None, dtype: str = "float32", ndim: int = -1) -> Var:
    """A var of a tensor of `shape` (dims may be ints or prim vars), or only of rank `ndim`."""
    return Var("x", TensorStructInfo(shape, dtype, ndim))  # type: ignore[arg-type]


def tensors(*shapes: tuple[object, ...], dtype: str = "float32") -> TupleStructInfo:
    """A tuple struct info of tensors of `shapes`."""
    return TupleStructInfo(tuple(TensorStructInfo(s, dtype) for s in shapes))  # type: ignore[arg-type]


def si(call: object) -> StructInfo:
    """The inferred struct info of a call."""
    return struct_info_of(call)  # type: ignore[arg-type]


def raises(message: str) -> AbstractContextManager[object]:
    """Expect the op layer's error, matching `message`."""
    return pytest.raises(StructInfoError, match=message)
