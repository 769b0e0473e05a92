"""Struct info: the static type and shape of every Relax value.

Tensors carry a dtype and a shape of prim expressions (ints or symbolic dims) or only a rank;
tuples nest; objects are opaque. Imports `ir.prim` and `ir.dtype` only.
"""

from __future__ import annotations

from dataclasses import dataclass

from lazyparams.ir.dtype import canonical_dtype
from lazyparams.ir.prim import IntImm, PrimExpr, as_prim


class StructInfo:
    """Base of struct info nodes."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ObjectStructInfo(StructInfo):
    """Any value at all (`R.Object`): what `call_packed` results are typed as."""


@dataclass(frozen=True, slots=True)
class PrimStructInfo(StructInfo):
    """A scalar of `dtype`, with its value when known (`R.Prim("int64")`)."""

    dtype: str = "int64"
    value: PrimExpr | None = None


@dataclass(frozen=True, slots=True)
class ShapeStructInfo(StructInfo):
    """A shape value (`R.Shape([n, 4])`), with its values when known or only its rank."""

    values: tuple[PrimExpr, ...] | None = None
    ndim: int = -1

    def __post_init__(self) -> None:
        if self.values is not None:
            object.__setattr__(self, "ndim", len(self.values))


@dataclass(frozen=True, slots=True)
class TensorStructInfo(StructInfo):
    """A tensor of `dtype` with a known shape, or only a known rank (`ndim`, -1 for unknown)."""

    shape: tuple[PrimExpr, ...] | None
    dtype: str
    ndim: int = -1

    def __post_init__(self) -> None:
        if self.shape is not None:
            # dims are most often IntImms already; as_prim wraps the rest
            dims = tuple(d if type(d) is IntImm else as_prim(d) for d in self.shape)
            object.__setattr__(self, "shape", dims)
            object.__setattr__(self, "ndim", len(self.shape))
        if self.dtype != "":
            object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints when every dim is a constant, else None."""
        if self.shape is None:
            return None
        values = [d.value for d in self.shape if isinstance(d, IntImm)]
        return tuple(values) if len(values) == len(self.shape) else None


@dataclass(frozen=True, slots=True)
class TupleStructInfo(StructInfo):
    """A tuple of values (`R.Tuple(...)`); `R.Tuple` with no fields is the unit value."""

    fields: tuple[StructInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class FuncStructInfo(StructInfo):
    """A function value: its parameter and return struct info and whether it is pure."""

    params: tuple[StructInfo, ...] | None
    ret: StructInfo
    purity: bool = True


def tensor(shape: tuple[PrimExpr | int, ...] | None, dtype: str) -> TensorStructInfo:
    """Shorthand for a tensor struct info from Python ints or prim expressions."""
    if shape is None:
        return TensorStructInfo(None, dtype)
    return TensorStructInfo(tuple(as_prim(d) for d in shape), dtype)
