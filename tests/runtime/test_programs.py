"""Random transform programs on the VM against a reference that keeps every value forever.

The reference walks the bindings with plain numpy and frees nothing, so agreement shows that the
VM's frees after last use never lose a value still needed; the meter must end at zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lazyparams.ir import (
    Call,
    Constant,
    Expr,
    Function,
    IRModule,
    PrimValue,
    Tuple,
    TupleGetItem,
    Var,
)
from lazyparams.ir.dtype import to_numpy
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from tests.programs import FUNC_NAME, SETTINGS, random_inputs, transform_programs


def _int8(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float32)
    amax = np.max(np.abs(np.moveaxis(x, axis, 0)).reshape(x.shape[axis], -1), axis=1)
    scale = np.where(amax == 0, 1, amax / np.float32(127)).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.clip(np.rint(x / scale.reshape(shape)), -127, 127).astype(np.int8), scale


def _slice(x: np.ndarray, a: dict[str, Any]) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for axis, b, e, s in zip(
        a["axes"], a["begin"], a["end"], a["strides"] or [1] * len(a["axes"]), strict=True
    ):
        index[axis] = slice(b, e, s)
    return x[tuple(index)]


def _dims(shape: Any) -> tuple[int, ...]:
    return tuple(d.value if isinstance(d, IntImm) else int(d) for d in shape)


REFERENCE: dict[str, Callable[[list[Any], dict[str, Any]], Any]] = {
    "permute_dims": lambda o, a: np.transpose(o[0], a.get("axes")),
    "astype": lambda o, a: o[0].astype(to_numpy(a["dtype"])),
    "add": lambda o, a: o[0] + o[1],
    "multiply": lambda o, a: o[0] * o[1],
    "concat": lambda o, a: np.concatenate(o[0], axis=a.get("axis", 0)),
    "reshape": lambda o, a: o[0].reshape(_dims(a["shape"])),
    "split": lambda o, a: tuple(np.split(o[0], a["indices_or_sections"], axis=a.get("axis", 0))),
    "strided_slice": lambda o, a: _slice(o[0], {"strides": None, **a}),
    "quantize_int8": lambda o, a: _int8(o[0], a.get("axis", 0)),
}


def _reference(func: Function, args: tuple[Any, ...]) -> Any:
    env: dict[Var, Any] = dict(zip(func.params, args, strict=True))

    def ev(expr: Expr) -> Any:
        if isinstance(expr, Var):
            return env[expr]
        if isinstance(expr, Constant):
            return expr.data
        if isinstance(expr, PrimValue):
            return expr.value.value  # type: ignore[attr-defined]
        if isinstance(expr, Tuple):
            return tuple(ev(f) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            return ev(expr.tuple_value)[expr.index]
        assert isinstance(expr, Call)
        return REFERENCE[expr.op.name]([ev(a) for a in expr.args], dict(expr.attrs))  # type: ignore[attr-defined]

    for binding in func.bindings():
        env[binding.var] = ev(binding.value)
    return ev(func.body.body)


def _assert_identical(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_identical(g, w)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want


@SETTINGS
@given(mod=transform_programs(), seed=st.integers(0, 2**16))
def test_vm_matches_a_reference_that_never_frees(mod: IRModule, seed: int) -> None:
    func = mod[FUNC_NAME]
    assert isinstance(func, Function)
    inputs = random_inputs(func, seed)
    vm = VirtualMachine(mod)
    got = vm[FUNC_NAME](inputs)
    _assert_identical(got, _reference(func, (inputs,)))
    assert vm.stats.current_bytes == 0
    assert len(vm.stats.timeline) == len(func.bindings()) + 1
    assert vm.stats.peak_bytes >= max(a.nbytes for a in inputs)
