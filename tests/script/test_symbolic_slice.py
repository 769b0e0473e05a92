"""`R.strided_slice` with symbolic bounds (`begin=[k]`, `end=[N - 2]`), as TVM 0.27 writes it:
read, printed back, run by the VM as numpy slices (clamping included); with apache-tvm installed,
TVM's print of such a module reads here and TVM reads ours and computes the same slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script import parse

SLICE = """
@R.function
def main(A: R.Tensor(("N",), "float32"), s: R.Shape(["k"])):
    N = T.int64()
    k = T.int64()
    b = R.strided_slice(A, axes=[0], begin=[{begin}], end=[{end}], strides={strides})
    return b
"""

BOUNDS = [
    ("k", "k + 2", "None"),
    ("0", "k", "None"),
    ("2", "k", "None"),
    ("N - 2", "N", "None"),
    ("k - 3", "-1", "None"),
    ("k", "N", "[2]"),
    ("k", "0", "[-1]"),
    ("N - k", "k", "[-2]"),
]


@pytest.mark.parametrize(("begin", "end", "strides"), BOUNDS)
def test_the_vm_slices_as_numpy_for_every_size(begin: str, end: str, strides: str) -> None:
    mod = parse(SLICE.format(begin=begin, end=end, strides=strides))
    vm = VirtualMachine(mod)
    step = 1 if strides == "None" else int(strides.strip("[]"))
    for n in (1, 3, 8):
        a = np.arange(n, dtype="float32")
        for k in (0, 1, 2, 5, 10):
            names = {"N": n, "k": k}
            expected = a[eval(begin, names) : eval(end, names) : step]
            np.testing.assert_array_equal(vm["main"](a, (k,)), expected)
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(mod.script(flavor=flavor)), mod)


AS_TVM_PRINTS_IT = """
# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

N = TypeVar("N")
k = TypeVar("k")
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((N, 4), dtype="float32"), s: R.Shape([k])) -> R.Tuple(R.Tensor(("T.min(k + 2, N) - T.min(k, N)", 4), dtype="float32"), R.Tensor(("T.max(N - T.max(T.if_then_else(N < 2, N * 2 - 2, N - 2), 0), 0)", 3), dtype="float32")):
        b: R.Tensor((T.min(k + 2, N) - T.min(k, N), 4), dtype="float32") = R.strided_slice(A, (0,), (k,), (k + 2,), assume_inbound=False)
        c: R.Tensor((T.max(N - T.max(T.if_then_else(N < 2, N * 2 - 2, N - 2), 0), 0), 3), dtype="float32") = R.strided_slice(A, (0, 1), (N - 2, 1), (N, 4), assume_inbound=False)
        return (b, c)
"""
"""TVM 0.27's print of `OURS` without its annotations (checked below where TVM is installed)."""

OURS = """
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor(("N", 4), "float32"), s: R.Shape(["k"])):
        N = T.int64()
        k = T.int64()
        b = R.strided_slice(A, axes=[0], begin=[k], end=[k + 2])
        c = R.strided_slice(A, axes=[0, 1], begin=[N - 2, 1], end=[N, 4])
        return (b, c)
"""


def _run(vm: VirtualMachine, n: int, k: int) -> tuple[Any, ...]:
    a = np.arange(n * 4, dtype="float32").reshape(n, 4)
    got = vm["main"](a, (k,))
    assert isinstance(got, tuple)
    return got


def test_tvm_s_print_reads_and_runs_as_ours() -> None:
    theirs, ours = parse(AS_TVM_PRINTS_IT), parse(OURS)
    b_theirs = theirs["main"].body.blocks[0].bindings[0]  # type: ignore[attr-defined]
    b_ours = ours["main"].body.blocks[0].bindings[0]  # type: ignore[attr-defined]
    assert_structural_equal(b_theirs.value, b_ours.value, map_free_vars=True)
    assert repr(b_theirs.var.struct_info) == repr(b_ours.var.struct_info)  # same inference
    for n in (1, 2, 3, 7):
        a = np.arange(n * 4, dtype="float32").reshape(n, 4)
        for k in (0, 1, 6, 9):
            for got in (_run(VirtualMachine(theirs), n, k), _run(VirtualMachine(ours), n, k)):
                np.testing.assert_array_equal(got[0], a[k : k + 2])
                np.testing.assert_array_equal(got[1], a[n - 2 : n, 1:4])


@pytest.mark.parametrize(
    ("bound", "message"),
    [
        ("T.float32(1.5)", "expected begin of an integer dtype, got 1.5: float32"),
        ("x", "undefined symbolic variable 'x'"),
    ],
)
def test_a_bad_bound_is_named(bound: str, message: str) -> None:
    text = SLICE.format(begin=bound, end="k", strides="None")
    with pytest.raises(ParseError, match=r"<string>:6:") as err:
        parse(text)
    assert message in err.value.reason


def test_a_symbolic_stride_is_refused() -> None:
    text = SLICE.format(begin="0", end="k", strides="[k]")
    with pytest.raises(ParseError, match="expected strides to be an int, got the symbolic k"):
        parse(text)


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")
    return tvm


def test_tvm_prints_the_module_as_the_text_above() -> None:
    _tvm()
    from tvm.script import from_source

    assert from_source(OURS).script().split() == AS_TVM_PRINTS_IT.split()


def test_tvm_reads_our_print_and_slices_the_same() -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    ours = parse(OURS)
    theirs = from_source(ours.script(flavor="tvm"))
    relax.analysis.well_formed(theirs)
    vm = relax.VirtualMachine(tvm.compile(theirs, target="llvm"), tvm.cpu())
    for n, k in ((1, 0), (3, 2), (7, 9)):
        a = np.arange(n * 4, dtype="float32").reshape(n, 4)
        got = vm["main"](tvm.runtime.tensor(a), tvm.runtime.ShapeTuple([k]))
        for theirs_out, our_out in zip(got, _run(VirtualMachine(ours), n, k), strict=True):
            np.testing.assert_array_equal(theirs_out.numpy(), our_out)
