"""call_tir, vm.kill_object, call_packed, zeros / ones, const and prim_value."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lazyparams import op
from lazyparams.ir import (
    Call,
    Constant,
    ExternFunc,
    GlobalVar,
    PrimValue,
    ShapeExpr,
    Tuple,
    Var,
    struct_info_of,
)
from lazyparams.ir.prim import FloatImm, IntImm, PrimVar
from lazyparams.ir.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from tests.op.helpers import raises, t

n = PrimVar("n")
F = GlobalVar("transform_layout")
OUT = TensorStructInfo((16, 3, 3, 3), "float32")


# call_tir ---------------------------------------------------------------------------------


def test_call_tir_one_output() -> None:
    x = t((3, 16, 3, 3))
    call = op.call_tir(F, (x,), out_sinfo=OUT)
    assert call.args[0] is F
    assert isinstance(call.args[1], Tuple) and call.args[1].fields == (x,)
    assert call.sinfo_args == (OUT,) and dict(call.attrs) == {}
    assert struct_info_of(call) == OUT


def test_call_tir_several_outputs_give_a_tuple() -> None:
    other = TensorStructInfo((n,), "int8")
    call = op.call_tir(F, [t((2,)), t((3,))], out_sinfo=[OUT, other])
    assert call.sinfo_args == (OUT, other)
    assert struct_info_of(call) == TupleStructInfo((OUT, other))


def test_call_tir_accepts_objects_and_wraps_a_single_operand() -> None:
    loaded = op.call_packed("get_item", op.prim_value(0))
    assert struct_info_of(op.call_tir(F, (loaded,), OUT)) == OUT
    x = t((2,))
    assert op.call_tir(F, x, OUT).args[1].fields == (x,)  # type: ignore[attr-defined]
    pair = Var("pair", TupleStructInfo((TensorStructInfo((2,), "float32"),) * 2))
    assert op.call_tir(F, pair, OUT).args[1] is pair


def test_call_tir_bad_input() -> None:
    with raises(r"R.call_tir: expected a PrimFunc's GlobalVar \(cls.f\) as first operand, got Var"):
        op.call_tir(t((2,)), (t((2,)),), OUT)  # type: ignore[arg-type]
    with raises(r"R.call_tir: expected out_sinfo, got none"):
        op.call_tir(F, (t((2,)),), [])
    with raises(r"R.call_tir: expected out_sinfo of tensors \(a list for several\), got R.Object"):
        op.call_tir(F, (t((2,)),), ObjectStructInfo())
    with raises(r"R.call_tir: expected argument 1 to be a tensor or prim, got R.Shape"):
        op.call_tir(F, (t((2,)), ShapeExpr((IntImm(3, "int64"),))), OUT)
    with raises(r"R.call_tir: expected tir_vars as R.shape\(\[...\]\), got R.Tensor"):
        struct_info_of(Call(op.call_tir(F, (), OUT).op, (F, Tuple(()), t((2,))), {}, (OUT,)))
    with raises(r"R.call_tir: expected the arguments as a tuple, got R.Tensor"):
        struct_info_of(Call(op.call_tir(F, (), OUT).op, (F, t((2,))), {}, (OUT,)))


# kill_object and call_packed ----------------------------------------------------------------


def test_kill_object_yields_the_unit_tuple() -> None:
    call = op.kill_object(t((2,)))
    assert call.op.name == "vm.kill_object"  # type: ignore[attr-defined]
    assert struct_info_of(call) == TupleStructInfo(())


def test_call_packed_is_a_call_of_an_extern() -> None:
    call = op.call_packed("set_item", op.prim_value(0), t((2,)))
    assert isinstance(call.op, ExternFunc) and call.op.global_symbol == "set_item"
    assert call.sinfo_args == (ObjectStructInfo(),) and dict(call.attrs) == {}
    typed = op.call_packed("get_item", op.prim_value(1), sinfo_args=OUT)
    assert typed.sinfo_args == (OUT,) and struct_info_of(typed) == OUT
    several = op.call_packed("f", sinfo_args=[OUT, OUT])
    assert struct_info_of(several) == TupleStructInfo((OUT, OUT))


def test_call_packed_bad_input() -> None:
    with raises(r"R.call_packed: expected a non-empty function name, got ''"):
        op.call_packed("")
    with raises(r"R.call_packed: expected argument 0 to be a Relax expression, got 1"):
        op.call_packed("get_item", 1)  # type: ignore[arg-type]
    with raises(r"R.call_packed: expected sinfo_args of struct info, got 'R.Object'"):
        op.call_packed("get_item", sinfo_args=["R.Object"])  # type: ignore[list-item]


# zeros / ones -----------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [op.zeros, op.ones])
def test_filled_tensors(fn) -> None:  # type: ignore[no-untyped-def]
    call = fn([n, 3], "float16")
    assert call.args == () and call.attrs["shape"] == (n, IntImm(3))
    assert struct_info_of(call) == TensorStructInfo((n, 3), "float16")
    assert struct_info_of(fn((), "int8")) == TensorStructInfo((), "int8")


@pytest.mark.parametrize("fn", [op.zeros, op.ones])
def test_filled_tensors_bad_input(fn) -> None:  # type: ignore[no-untyped-def]
    name = fn.__name__
    with raises(rf"R.{name}: expected non-negative dims, got \(2, -1\)"):
        fn([2, -1], "float32")
    with raises(rf"R.{name}: expected dtype to be a dtype name, got 'float'"):
        fn([2], "float")


# const and prim_value ---------------------------------------------------------------------


def test_const_from_numbers_lists_and_arrays() -> None:
    c = op.const([[1, 2], [3, 4]], "float32")
    assert isinstance(c, Constant) and c.data.dtype == np.float32
    assert struct_info_of(c) == TensorStructInfo((2, 2), "float32")
    assert op.const(1.5).data.dtype == np.float32
    assert op.const(3).data.dtype == np.int32
    assert op.const(True).data.dtype == np.bool_
    assert op.const(np.zeros((2,), np.int8)).data.dtype == np.int8
    assert op.const(0.5, "bfloat16").data.dtype == ml_dtypes.bfloat16
    assert struct_info_of(op.const(2.0, "float16")) == TensorStructInfo((), "float16")


def test_const_bad_input() -> None:
    with raises(r"R.const: expected a dtype name, got 'f32'"):
        op.const(1.0, "f32")
    with raises(r"R.const: expected a number or a nested list of numbers, got 'a'"):
        op.const("a")
    with raises(r"R.const: expected a number or a nested list of numbers"):
        op.const([[1, 2], [3]])
    with raises(r"R.const: expected a number or a nested list of numbers for int8"):
        op.const(300, "int8")
    with raises(r"R.const: expected an array of an IR dtype, got one of complex64"):
        op.const(np.zeros(2, np.complex64))


def test_prim_value() -> None:
    assert op.prim_value(3).value == IntImm(3)
    assert op.prim_value(0.5).value == FloatImm(0.5)
    v = op.prim_value(n)
    assert isinstance(v, PrimValue) and v.value is n
    assert struct_info_of(v) == PrimStructInfo("int64", n)
    with raises(r"R.prim_value: expected an int, a float or a prim expression, got '1'"):
        op.prim_value("1")  # type: ignore[arg-type]
