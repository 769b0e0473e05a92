"""`R.assert_op`, TVM's runtime check: read as we and TVM 0.27 write it (a prim condition, the
message's values one by one or as a list, `format=` a string or `R.str`), run by the VM (nothing
when it holds, an error with the formatted message when not), and printed so TVM reads it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.errors import ParseError, RuntimeExecError, WellFormedError
from lazyparams.ir import assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script.parser import parse

CHECKED = """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor(["N"], "float32")):
        N = T.int64()
        _ = R.assert_op(N % 2 == 0)
        c: R.Prim("bool") = R.prim_value(N % 4 == 0)
        _1 = R.assert_op(c, [R.prim_value(N), A], format="N={} is not a multiple of 4")
        return A
"""

AS_TVM_PRINTS_IT = """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor(("N",), dtype="float32")) -> R.Tensor(("N",), dtype="float32"):
        N = T.int64()
        R.assert_op(N % 2 == 0, format=R.str(""))
        c: T.bool = N % 4 == 0
        R.assert_op(c, N, A, format=R.str("N={} is not a multiple of 4"))
        return A
"""


def test_the_vm_passes_a_holding_check_and_names_a_failing_one() -> None:
    vm = VirtualMachine(parse(CHECKED))
    np.testing.assert_array_equal(vm["main"](np.ones(8, np.float32)), np.ones(8, np.float32))
    with pytest.raises(RuntimeExecError, match=r"binding 0 \(_\): assert_op: .* no message"):
        vm["main"](np.ones(3, np.float32))
    with pytest.raises(RuntimeExecError, match="N=6 is not a multiple of 4"):
        vm["main"](np.ones(6, np.float32))


def test_tvm_s_print_reads_as_ours() -> None:
    ours = parse(CHECKED)
    well_formed(ours)
    theirs = parse(AS_TVM_PRINTS_IT)
    assert_structural_equal(theirs, ours)
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(ours.script(flavor=flavor)), ours)


def test_a_check_is_impure_so_no_dataflow_block_holds_it() -> None:
    text = """
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        y = R.add(x, x)
        _ = R.assert_op(R.prim_value(T.bool(True)))
        R.output(y)
    return y
"""
    with pytest.raises(WellFormedError, match=r"impure call R\.assert_op inside a dataflow block"):
        well_formed(parse(text))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("R.assert_op(A)", "expected a bool scalar condition"),
        ("R.assert_op(c, format=R.prim_value(1))", "expected a format string"),
        ("R.assert_op(c, sinfo=R.Tuple)", "unexpected keyword sinfo"),
    ],
)
def test_a_bad_check_is_refused_naming_the_line(call: str, message: str) -> None:
    text = CHECKED.replace(
        'R.assert_op(c, [R.prim_value(N), A], format="N={} is not a multiple of 4")', call
    )
    with pytest.raises(ParseError, match=message) as err:
        parse(text)
    assert ":9:" in str(err.value)


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")
    return tvm


def test_tvm_reads_our_print_as_its_own_module() -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    theirs = from_source(parse(CHECKED).script(flavor="tvm"))
    relax.analysis.well_formed(theirs)
    tvm.ir.assert_structural_equal(theirs, from_source(CHECKED))
    assert_structural_equal(parse(theirs.script()), parse(CHECKED))
