"""PrimFunc kernels: a PrimFunc checked once against the supported subset, then run on arrays.

Binding checks each array against its buffer (dtype, rank, static and symbolic dims) before the
vectorised evaluator writes the outputs in place. Imports `ir` and `tir` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.describe import show_shape
from lazyparams.ir.dtype import to_numpy
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar
from lazyparams.tir.eval import eval_scalar, execute
from lazyparams.tir.nodes import Buffer, PrimFunc
from lazyparams.tir.subset import Array, Checker, accesses


class PrimFuncKernel:
    """A PrimFunc checked against the supported subset, callable on numpy arrays in place."""

    def __init__(self, func: PrimFunc, name: str) -> None:
        Checker(func, name).stmt(func.body, frozenset(), False, "body")
        self.func, self.name = func, name
        written = accesses(func.body)[1]
        self.written = tuple(i for i, b in enumerate(func.params) if b in written)
        """Positions of the parameters the kernel writes."""

    def __call__(self, arrays: Sequence[Array]) -> None:
        """Run the kernel; `arrays` follow the parameters (inputs, then outputs)."""
        bound, symbols = self._bind(arrays)
        for i in self.written:
            if not arrays[i].flags.writeable:
                raise RuntimeExecError(
                    f"PrimFunc {self.name}: expected a writeable array for "
                    f"{self.func.params[i].name}, got a read-only one"
                )
        execute(self.func.body, bound, symbols)

    def _bind(self, arrays: Sequence[Array]) -> tuple[dict[Buffer, Array], dict[PrimVar, int]]:
        """Arrays by buffer and the symbolic dims they fix; a mismatch names the buffer."""
        params = self.func.params
        if len(arrays) != len(params):
            raise RuntimeExecError(
                f"PrimFunc {self.name}: expected {len(params)} arrays, got {len(arrays)}"
            )
        symbols: dict[PrimVar, int] = {}
        for buf, arr in zip(params, arrays, strict=True):
            if isinstance(buf, PrimVar):
                symbols[buf] = self._scalar(buf, arr)
                continue
            ok = isinstance(arr, np.ndarray) and arr.dtype == to_numpy(buf.dtype)
            if not ok or arr.ndim != len(buf.shape):
                self._mismatch(buf, arr)
            for dim, n in zip(buf.shape, arr.shape, strict=True):
                if isinstance(dim, PrimVar) and symbols.setdefault(dim, n) != n:
                    self._mismatch(buf, arr)
        bound = {b: a for b, a in zip(params, arrays, strict=True) if isinstance(b, Buffer)}
        for buf, arr in bound.items():
            if tuple(_dim_value(d, symbols) for d in buf.shape) != arr.shape:
                self._mismatch(buf, arr)
        return bound, symbols

    def _scalar(self, param: PrimVar, value: Any) -> int:
        """The int a scalar param (`n: T.int64`) is called with; anything else is refused."""
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise RuntimeExecError(
                f"PrimFunc {self.name}: scalar {param.name}: expected an int "
                f"(R.prim_value), got {type(value).__name__}"
            )
        return int(value)

    def _mismatch(self, buf: Buffer, arr: Any) -> NoReturn:
        got = (
            f"{arr.dtype} array of shape {arr.shape}"
            if isinstance(arr, np.ndarray)
            else type(arr).__name__
        )
        raise RuntimeExecError(
            f"PrimFunc {self.name}: buffer {buf.name}: expected {buf.dtype} "
            f"array of shape {show_shape(buf.shape)}, got {got}"
        )


def _dim_value(dim: PrimExpr, symbols: dict[PrimVar, int]) -> int:
    return dim.value if isinstance(dim, IntImm) else int(eval_scalar(dim, symbols))


def compile_prim_func(func: PrimFunc, name: str = "prim_func") -> PrimFuncKernel:
    """Check `func` against the supported subset and return it ready to run on arrays."""
    return PrimFuncKernel(func, name)


def eval_prim_func(func: PrimFunc, arrays: Sequence[Array], name: str = "prim_func") -> None:
    """Evaluate `func` on `arrays` (inputs, then the outputs it writes in place)."""
    compile_prim_func(func, name)(arrays)
