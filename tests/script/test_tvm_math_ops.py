"""The math ops between lazyparams and TVM (with apache-tvm installed): what TVM prints reads
back here, what lazyparams prints in TVM's flavour TVM reads back as the same module, and both
VMs compute the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.ir import assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script import parse

tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")

SOURCE = """
# from tvm.script import ir as I, relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((4,), "float32")):
        one = R.const(1.0, "float32")
        zero = R.const(0.0, "float32")
        a = R.abs(x)
        b = R.sign(x)
        c = R.sqrt(a)
        sin = R.sin(x)
        d = R.acos(sin)
        cos = R.cos(y)
        e = R.exp(cos)
        a1 = R.add(a, one)
        f = R.log(a1)
        g = R.negative(x)
        h = R.square(x)
        i = R.maximum(x, y)
        j = R.minimum(x, y)
        k = R.greater(x, y)
        l = R.less_equal(x, y)
        ge = R.greater_equal(x, zero)
        m = R.logical_and(k, ge)
        mask = R.logical_or(m, l)
        n = R.where(mask, x, y)
        o = R.sum(x, axis=1, keepdims=True)
        p = R.mean(x)
        q = R.max(x, axis=[-1, 0])
        r = R.min(x, axis=[0], keepdims=False)
        s = R.equal(b, one)
        t = R.not_equal(x, y)
        u = R.less(x, y)
        return (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u)
"""
EXACT = {0, 1, 2, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20}
"""Outputs TVM's kernels compute bit for bit as numpy does; the others (transcendental
functions and sums, whose order differs) agree to rounding."""


def test_tvm_prints_what_lazyparams_reads_and_reads_what_it_prints() -> None:
    from tvm.script import from_source

    theirs = from_source(SOURCE)
    ours = parse(theirs.script())
    assert_structural_equal(ours, parse(SOURCE))
    back = from_source(ours.script(flavor="tvm"))
    tvm.ir.assert_structural_equal(back, theirs)


def _tvm_run(mod: Any, args: list[np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    return [v.numpy() for v in vm["main"](*(tvm.runtime.tensor(a) for a in args))]


def test_both_vms_agree() -> None:
    from tvm.script import from_source

    rng = np.random.default_rng(5)
    args = [rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")]
    args[0][0, :2] = args[1][:2]  # some equal elements for the comparisons
    ours = VirtualMachine(parse(SOURCE))["main"](*args)
    theirs = _tvm_run(from_source(parse(SOURCE).script(flavor="tvm")), args)
    assert len(ours) == len(theirs) == 21
    for index, (got, want) in enumerate(zip(theirs, ours, strict=True)):
        assert got.dtype == want.dtype and got.shape == want.shape, index
        if index in EXACT:
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")
        else:
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, err_msg=f"output {index}")
