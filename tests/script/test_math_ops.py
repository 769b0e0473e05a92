"""The math ops in the script syntax: printed as Relax spells them, parsed back equal, checked
where they stand, and run by the VM."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import ParseError
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from tests.script.util import golden, roundtrip


@I.ir_module
class Merge:
    @R.function
    def main(a: R.Tensor(("n", 4), "float32"), b: R.Tensor((4,), "float32")) -> R.Tuple(
        R.Tensor(("n", 4), "float32"), R.Tensor((4,), "float32"), R.Tensor((), "float32")
    ):
        n = T.int64()
        with R.dataflow():
            s = R.sign(a)
            m = R.abs(a)
            r = R.sqrt(R.square(m))
            t = R.acos(R.cos(R.sin(b)))
            e = R.log(R.exp(R.negative(t)))
            hi = R.maximum(a, b)
            lo = R.minimum(hi, R.const(1.0, "float32"))
            g = R.greater(a, b)
            ge = R.greater_equal(a, b)
            le = R.less_equal(a, R.const(0.0, "float32"))
            lt = R.less(a, b)
            eq = R.equal(a, b)
            ne = R.not_equal(s, R.const(0.0, "float32"))
            mask = R.logical_or(R.logical_and(g, ge), R.logical_and(le, R.logical_or(lt, eq)))
            w = R.where(R.logical_and(mask, ne), lo, r)
            total = R.sum(w, axis=[0], keepdims=False)
            mean = R.mean(a, axis=None, keepdims=False)
            peak = R.max(R.add(total, e), axis=[-1], keepdims=True)
            low = R.min(peak)
            gv = (w, total, R.add(mean, low))
            R.output(gv)
        return gv


def test_every_math_op_round_trips() -> None:
    text = Merge.script()
    for spelling in (
        "R.sum(w, axis=[0], keepdims=False)",
        "R.mean(a, axis=None, keepdims=False)",
        "R.max(R.add(total, e), axis=[-1], keepdims=True)",
        "R.min(peak, axis=None, keepdims=False)",
        "R.where(R.logical_and(mask, ne), lo, r)",
        'R.Tensor((n, 4), dtype="bool") = R.greater(a, b)',
        "R.acos(",
    ):
        assert spelling in text, spelling
    roundtrip(Merge)


def test_the_vm_runs_the_math_as_numpy_does() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")
    w, total, last = VirtualMachine(Merge)["main"](a, b)
    with np.errstate(all="ignore"):
        s, r = np.sign(a), np.sqrt(np.square(np.abs(a)))
        e = np.log(np.exp(np.negative(np.arccos(np.cos(np.sin(b))))))
        lo = np.minimum(np.maximum(a, b), np.float32(1))
        mask = ((a > b) & (a >= b)) | ((a <= 0) & ((a < b) | (a == b)))
        want_w = np.where(mask & (s != 0), lo, r)
        want_total = np.sum(want_w, axis=0, dtype=np.float32)
        peak = np.max(want_total + e, axis=-1, keepdims=True)
        want_last = np.mean(a, dtype=np.float32) + np.min(peak)
    np.testing.assert_array_equal(w, want_w)
    np.testing.assert_array_equal(total, want_total)
    assert last.shape == () and last.dtype == np.float32
    np.testing.assert_array_equal(last, want_last)


def test_a_reduction_prints_its_attrs_as_relax_does() -> None:
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2, 3), "float16")) -> R.Tensor((2, 1), "float16"):
            y = R.sum(x, axis=1, keepdims=True)
            return y

    golden(
        Module,
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @R.function
            def main(x: R.Tensor((2, 3), dtype="float16")) -> R.Tensor((2, 1), dtype="float16"):
                y: R.Tensor((2, 1), dtype="float16") = R.sum(x, axis=[1], keepdims=True)
                return y
        """,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("y = R.sqrt(i)", "R.sqrt: expected x of a float dtype, got int32"),
        ("y = R.less(x, i)", "R.less: expected operands of one dtype, got float32 and int32"),
        ("y = R.logical_and(x, x)", "R.logical_and: expected x1 of dtype bool, got float32"),
        ("y = R.where(x, x, x)", "R.where: expected condition of dtype bool, got float32"),
        ("y = R.mean(i)", "R.mean: expected x of a float dtype, got int32"),
        ("y = R.sum(x, axis=[0, 2])", "R.sum: expected axis in \\[-2, 2\\)"),
        ("y = R.max(x, keepdims=1)", "R.max: expected keepdims to be True or False, got 1"),
        ("y = R.min(x, axes=[0])", "R.min: expected one of x=, axis=, keepdims=, .*got axes="),
    ],
)
def test_bad_math_calls_are_refused_where_they_stand(line: str, message: str) -> None:
    text = f"""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), i: R.Tensor((2, 3), "int32")):
        {line}
        return y
"""
    with pytest.raises(ParseError, match=r":6:\d+: " + message):
        parse(text)
