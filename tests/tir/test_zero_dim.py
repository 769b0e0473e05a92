"""0-d TIR buffers: a scalar buffer parses, prints as `A[()]` (regions too), reads back to the
same module, and evaluates, as the target of a store, a reduction and a broadcast operand."""

from __future__ import annotations

import numpy as np

from lazyparams.ir import assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import tir as T


@I.ir_module
class Scalars:
    @T.prim_func
    def add_one(a: T.Buffer((), "float32"), out: T.Buffer((), "float32")):
        with T.block("compute"):
            T.reads(a[()])
            T.writes(out[()])
            out[()] = a[()] + T.float32(1)

    @T.prim_func
    def total(a: T.Buffer((4, 3), "float32"), out: T.Buffer((), "float32")):
        for i, j in T.grid(4, 3):
            with T.block("sum"):
                vi, vj = T.axis.remap("RR", [i, j])
                T.reads(a[vi, vj])
                T.writes(out[()])
                with T.init():
                    out[()] = T.float32(0)
                out[()] = out[()] + a[vi, vj]

    @T.prim_func
    def scale(
        a: T.Buffer((4, 3), "float32"), s: T.Buffer((), "float32"), out: T.Buffer((4, 3), "float32")
    ):
        for i, j in T.grid(4, 3):
            with T.block("scale"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(a[vi, vj], s[()])
                T.writes(out[vi, vj])
                out[vi, vj] = a[vi, vj] * s[()]

    @R.function
    def main(x: R.Tensor((4, 3), "float32")):
        cls = Scalars
        t = R.call_tir(cls.total, (x,), out_sinfo=R.Tensor((), "float32"))
        u = R.call_tir(cls.add_one, (t,), out_sinfo=R.Tensor((), "float32"))
        gv = R.call_tir(cls.scale, (x, u), out_sinfo=R.Tensor((4, 3), "float32"))
        return (t, u, gv)


def test_a_zero_dim_buffer_prints_its_loads_stores_and_regions_as_empty_tuples() -> None:
    text = Scalars.script()
    assert "T.reads(a[()])" in text and "T.writes(out[()])" in text
    assert "out[()] = out[()] + a[vi, vj]" in text
    assert "[]" not in text


def test_a_zero_dim_module_reads_back_to_itself() -> None:
    assert_structural_equal(parse(Scalars.script()), Scalars, map_free_vars=True)


def test_zero_dim_buffers_evaluate_as_store_reduction_and_broadcast() -> None:
    x = np.arange(12, dtype="float32").reshape(4, 3)
    t, u, gv = VirtualMachine(Scalars)["main"](x)
    assert isinstance(t, np.ndarray) and t.shape == () and t.dtype == np.float32
    assert float(t) == 66.0 and float(u) == 67.0
    np.testing.assert_array_equal(gv, x * np.float32(67.0))
