"""Op inference remembered per operand struct infos: the same answers as inferring afresh."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.errors import StructInfoError
from lazyparams.ir import Call, Tuple, Var, get_op, struct_info_of
from lazyparams.ir.op_registry import OpInfo, op_info, register_op
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.ir.struct_info import TensorStructInfo, tensor

SINFO = tensor((4, 8), "float32")


def test_calls_on_vars_of_one_struct_info_share_the_result() -> None:
    a, b = Var("a", SINFO), Var("b", SINFO)
    first = struct_info_of(op.expand_dims(a, 0))
    assert struct_info_of(op.expand_dims(b, 0)) is first
    assert first == tensor((1, 4, 8), "float32")
    assert struct_info_of(op.expand_dims(b, 2)) == tensor((4, 8, 1), "float32")


def test_tuples_of_vars_are_remembered_by_their_fields() -> None:
    a, b = Var("a", SINFO), Var("b", tensor((4, 8), "float32"))
    joined = struct_info_of(op.concat((a, a), axis=1))
    assert joined == tensor((4, 16), "float32")
    assert struct_info_of(op.concat((a, b), axis=0)) == tensor((8, 8), "float32")


def test_an_attr_equal_to_a_remembered_one_but_of_another_type_is_checked_again() -> None:
    a = Var("a", SINFO)
    assert struct_info_of(op.expand_dims(a, 1)) == tensor((4, 1, 8), "float32")
    by_hand = Call(get_op("expand_dims"), (a,), {"axis": True})  # True == 1 as a dict key
    with pytest.raises(StructInfoError, match="expected axis to be an int"):
        struct_info_of(by_hand)


def test_failures_are_not_remembered() -> None:
    a = Var("a", SINFO)
    bad = Call(get_op("expand_dims"), (a,), {"axis": 5})
    for _ in range(2):
        with pytest.raises(StructInfoError, match="axis"):
            struct_info_of(bad)


def test_an_op_registered_again_is_inferred_by_its_new_entry() -> None:
    original = op_info("expand_dims")
    a = Var("a", SINFO)
    call = Call(get_op("expand_dims"), (a,), {"axis": 0})
    assert struct_info_of(call) == tensor((1, 4, 8), "float32")
    marker = TensorStructInfo(None, "int8")
    register_op(OpInfo(original.name, original.params, lambda _: marker, original.pure))
    try:
        assert struct_info_of(call) is marker
    finally:
        register_op(original)
    assert struct_info_of(call) == tensor((1, 4, 8), "float32")


def test_operands_other_than_vars_are_inferred_each_time() -> None:
    inline = Tuple((Var("a", SINFO), Var("b", None)))
    with pytest.raises(StructInfoError):
        struct_info_of(Call(get_op("concat"), (inline,), {"axis": 0}))


def test_static_tensors_alike_but_separate_objects_share_the_result() -> None:
    a, b = Var("a", tensor((4, 8), "float32")), Var("b", tensor((4, 8), "float32"))
    assert a.struct_info is not b.struct_info
    first = struct_info_of(op.reshape(a, (2, -1)))
    assert struct_info_of(op.reshape(b, (2, -1))) is first
    assert first == tensor((2, 16), "float32")
    assert struct_info_of(op.reshape(b, (-1, 2))) == tensor((16, 2), "float32")
    other = Var("c", tensor((4, 8), "float16"))
    assert struct_info_of(op.reshape(other, (2, -1))) == tensor((2, 16), "float16")


def test_a_dim_equal_to_a_remembered_one_but_of_another_type_is_inferred_again() -> None:
    ints = Var("a", tensor((1, 8), "float32"))
    bools = Var("b", TensorStructInfo((IntImm(True), IntImm(8)), "float32"))  # True == 1
    assert type(struct_info_of(op.expand_dims(ints, 0)).shape[1].value) is int  # type: ignore[union-attr]
    result = struct_info_of(op.expand_dims(bools, 0))
    assert isinstance(result, TensorStructInfo) and result.shape is not None
    assert type(result.shape[1]) is IntImm and result.shape[1].value is True


def test_symbolic_dims_are_remembered_by_the_struct_info_object_only() -> None:
    n, m = PrimVar("n"), PrimVar("m")
    a, b = Var("a", tensor((n, 8), "float32")), Var("b", tensor((m, 8), "float32"))
    assert struct_info_of(op.expand_dims(a, 0)) == tensor((1, n, 8), "float32")
    assert struct_info_of(op.expand_dims(b, 0)) == tensor((1, m, 8), "float32")
