"""Prim values written bare where a Relax value is expected, as TVM 0.27 prints them
(`R.assert_op(c, 16, N)`, `s = A, 16, N + 1`, `fget(0, ...)`, `c: T.bool = True`): read as
`R.prim_value(...)`, run by the VM, printed so both parsers read them back; with apache-tvm
installed, TVM's own print of such a module reads here and TVM reads ours."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.errors import ParseError, RuntimeExecError
from lazyparams.ir import PrimValue, TupleGetItem, assert_structural_equal
from lazyparams.ir.expr import Call, Function, Tuple
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from lazyparams.script import parse

OURS = """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(
        A: R.Tensor(("N",), "float32"),
    ) -> R.Tuple(R.Tensor(("N",), "float32"), R.Prim("int64"), R.Prim("int64")):
        N = T.int64()
        _ = R.assert_op(
            R.prim_value(N % 4 == 0),
            [R.prim_value(4), R.prim_value(N)],
            format="expected a multiple of {}, got {}",
        )
        c: R.Prim("bool") = R.prim_value(T.bool(True))
        _1 = R.assert_op(c)
        s: R.Tuple(R.Tensor((N,), "float32"), R.Prim("int64"), R.Prim("int64")) = (
            A,
            R.prim_value(16),
            R.prim_value(N + 1),
        )
        return s
"""

AS_TVM_PRINTS_IT = """
# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

N = TypeVar("N")
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor((N,), dtype="float32")) -> R.Tuple(R.Tensor((N,), dtype="float32"), T.int64, T.int64):
        R.assert_op(N % 4 == 0, 4, N, format=R.str("expected a multiple of {}, got {}"))
        c: T.bool = True
        R.assert_op(c, format=R.str(""))
        s: R.Tuple(R.Tensor((N,), dtype="float32"), T.int64, T.int64) = A, 16, N + 1
        return s
"""
"""TVM 0.27's `from_source(OURS).script()`, verbatim (checked below where TVM is installed)."""


def test_tvm_s_print_reads_as_ours_and_runs() -> None:
    ours = parse(OURS)
    well_formed(ours)
    theirs = parse(AS_TVM_PRINTS_IT)
    assert_structural_equal(theirs, ours)
    vm = VirtualMachine(theirs)
    a = np.arange(8, dtype="float32")
    got = vm["main"](a)
    assert isinstance(got, tuple) and got[1:] == (16, 9)
    np.testing.assert_array_equal(got[0], a)
    with pytest.raises(RuntimeExecError, match="expected a multiple of 4, got 6"):
        vm["main"](np.ones(6, "float32"))


def test_our_print_reads_back_in_both_flavours() -> None:
    ours = parse(AS_TVM_PRINTS_IT)
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(ours.script(flavor=flavor)), ours)


BODY = """
@R.function(pure=False)
def main(
    A: R.Tensor(("N",), "float32"),
    f: R.Callable((T.int64, R.Any), R.Any, False),
):
    N = T.int64()
    {statement}
    return A
"""


def _main(text: str) -> Function:
    func = parse(text)["main"]
    assert isinstance(func, Function)
    return func


@pytest.mark.parametrize(
    ("statement", "values"),
    [
        ("v = 16", [IntImm(16)]),
        ("v = -3", [IntImm(-3)]),
        ("v: T.bool = True", [IntImm(1, "bool")]),
        ("v: T.float32 = T.float32(1.5)", ["float32"]),
        ("v = A, 3, N + 1", [None, IntImm(3), "int64"]),
        ("v = (A, T.int32(7))", [None, IntImm(7, "int32")]),
        ("v = f(0, R.str('w'))", [IntImm(0), None]),
        ('v = R.call_packed("get", 2, N, sinfo_args=R.Any)', [IntImm(2), "int64"]),
    ],
)
def test_a_bare_prim_value_is_read_as_r_prim_value(statement: str, values: list[Any]) -> None:
    value = _main(BODY.format(statement=statement)).body.blocks[0].bindings[-1].value
    operands = value.args if isinstance(value, Call) else getattr(value, "fields", (value,))
    assert len(operands) == len(values)
    for operand, want in zip(operands, values, strict=True):
        if want is None:
            assert not isinstance(operand, PrimValue)
            continue
        assert isinstance(operand, PrimValue)
        if isinstance(want, str):
            assert operand.value.dtype == want
        else:
            assert operand.value == want


def test_a_bare_prim_value_runs_where_tvm_writes_one() -> None:
    text = BODY.replace("return A", "return v").format(statement="v = f(N - 1, 2), N * 2, True")
    calls: list[tuple[Any, ...]] = []
    got = VirtualMachine(parse(text))["main"](
        np.zeros(5, "float32"), lambda *args: calls.append(args) or "loaded"
    )
    assert got == ("loaded", 10, True) and calls == [(4, 2)]


def test_a_relax_var_in_arithmetic_stays_a_relax_op() -> None:
    value = _main(BODY.format(statement="v = A + A")).body.blocks[0].bindings[-1].value
    assert isinstance(value, Call) and getattr(value.op, "name", None) == "add"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("v = 1.5", "expected a Relax expression (write R.prim_value(...) or R.const(...))"),
        ("v = A + 1", "R.add: expected"),
        ("v = A[N]", "expected a non-negative int tuple index, got N"),
    ],
)
def test_what_stays_refused_is_named(statement: str, message: str) -> None:
    with pytest.raises(ParseError, match=r"<string>:8:") as err:
        parse(BODY.format(statement=statement))
    assert message in err.value.reason


def test_a_tuple_index_is_still_a_tuple_get_item() -> None:
    text = BODY.replace("return A", "return w").format(statement="v = A, 3\n    w = v[1]")
    func = _main(text)
    assert isinstance(func.body.blocks[0].bindings[-1].value, TupleGetItem)
    assert isinstance(func.body.blocks[0].bindings[0].value, Tuple)


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")
    return tvm


def test_tvm_prints_the_module_as_the_text_above() -> None:
    _tvm()
    from tvm.script import from_source

    printed = from_source(OURS).script()
    assert printed.split() == AS_TVM_PRINTS_IT.split()
    assert_structural_equal(parse(printed), parse(OURS))


def test_tvm_reads_our_print_as_its_own_module() -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    for text in (OURS, AS_TVM_PRINTS_IT):
        theirs = from_source(parse(text).script(flavor="tvm"))
        relax.analysis.well_formed(theirs)
        tvm.ir.assert_structural_equal(theirs, from_source(OURS))
