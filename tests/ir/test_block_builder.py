"""BlockBuilder: fresh names, struct info on emit, block kinds, and the functions it finishes."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.errors import LazyParamsError, StructInfoError
from lazyparams.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    DataflowBlock,
    DataflowVar,
    MatchCast,
    ObjectStructInfo,
    TensorStructInfo,
    Tuple,
    TupleStructInfo,
    Var,
    VarBinding,
    assert_structural_equal,
    get_op,
)
from lazyparams.ir.block_builder import NameTable
from lazyparams.ir.prim import PrimVar
from lazyparams.script import relax as R

F32 = TensorStructInfo((2, 3), "float32")


# Names --------------------------------------------------------------------------------------


def test_fresh_names_count_up_per_hint_and_skip_reserved_ones() -> None:
    names = NameTable()
    names.reserve("lv_1")
    assert [names.fresh("lv") for _ in range(3)] == ["lv", "lv_2", "lv_3"]
    assert names.fresh("gv") == "gv"
    assert names.fresh("lv_2") == "lv_2_1"


def test_a_copied_table_is_independent_of_the_original() -> None:
    names = NameTable()
    names.fresh("i")
    inner = names.copy()
    assert inner.fresh("i") == "i_1"
    assert names.fresh("j") == "j"
    assert names.fresh("i") == "i_1"  # the copy's name did not leak back


def test_emitted_bindings_reserve_their_names() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    bb.emit_binding(VarBinding(Var("lv", F32), x))
    assert bb.emit(op.astype(x, "float16")).name_hint == "lv_1"


# Emission -----------------------------------------------------------------------------------


def test_emit_infers_struct_info_unless_given() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    t = bb.emit(op.permute_dims(x), "t")
    assert t.struct_info == TensorStructInfo((3, 2), "float32")
    obj = bb.emit(x, "obj", ObjectStructInfo())
    assert obj.struct_info == ObjectStructInfo()


def test_emit_refuses_an_ill_typed_value_before_binding_it() -> None:
    bb = BlockBuilder()
    mixed = Tuple((Var("a", F32), Var("b", TensorStructInfo((2, 3), "float16"))))
    call = Call(get_op("concat"), (mixed,), {"axis": 0})  # built by hand, so never checked
    with pytest.raises(StructInfoError, match=r"R\.concat: expected tensors of one dtype"):
        bb.emit(call)
    assert bb.take_blocks() == ()


def test_dataflow_blocks_bind_dataflow_vars_and_outputs_plain_vars() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    with bb.dataflow():
        assert bb.in_dataflow
        inner = bb.emit(op.astype(x, "float16"))
        out = bb.emit_output(inner)
    assert not bb.in_dataflow
    assert isinstance(inner, DataflowVar) and not isinstance(out, DataflowVar)
    (block,) = bb.take_blocks()
    assert isinstance(block, DataflowBlock)
    assert [b.var for b in block.bindings] == [inner, out]


def test_emit_output_outside_a_dataflow_block_is_refused() -> None:
    bb = BlockBuilder()
    with pytest.raises(LazyParamsError, match="emit_output: expected an open dataflow block"):
        bb.emit_output(Var("x", F32))


def test_match_cast_binds_the_cast_struct_info() -> None:
    bb = BlockBuilder()
    n = PrimVar("n")
    cast = TensorStructInfo((n, 3), "float32")
    y = bb.match_cast(Var("x", ObjectStructInfo()), cast, "y")
    (block,) = bb.take_blocks()
    (binding,) = block.bindings
    assert isinstance(binding, MatchCast) and binding.var is y
    assert y.struct_info == cast == binding.struct_info


def test_empty_blocks_are_dropped_and_take_blocks_resets_the_builder() -> None:
    bb = BlockBuilder()
    with bb.dataflow():
        pass
    bb.begin_block(is_dataflow=False)
    bb.end_block()
    assert bb.take_blocks() == ()
    bb.emit(Var("x", F32))
    assert len(bb.take_blocks()) == 1
    assert bb.take_blocks() == ()


def test_a_plain_block_after_a_dataflow_block_starts_a_new_block() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    with bb.dataflow():
        bb.emit_output(x)
    bb.emit(x)
    kinds = [type(block) for block in bb.take_blocks()]
    assert kinds == [DataflowBlock, BindingBlock]


# Functions ----------------------------------------------------------------------------------


@R.function
def expected_function(x: R.Tensor((2, 3), dtype="float32")) -> R.Tuple(
    R.Tensor((3, 2), dtype="float16")
):
    with R.dataflow():
        lv: R.Tensor((3, 2), dtype="float32") = R.permute_dims(x, axes=None)
        gv: R.Tensor((3, 2), dtype="float16") = R.astype(lv, dtype="float16")
        R.output(gv)
    return (gv,)


def test_finish_function_matches_the_same_function_in_the_script_syntax() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    with bb.dataflow():
        lv = bb.emit(op.permute_dims(x))
        gv = bb.emit_output(op.astype(lv, "float16"))
    func = bb.finish_function((x,), Tuple((gv,)))
    assert func.ret_struct_info == TupleStructInfo((TensorStructInfo((3, 2), "float16"),))
    assert_structural_equal(func, expected_function)


def test_finish_function_keeps_a_declared_return_type_purity_and_attrs() -> None:
    bb = BlockBuilder()
    x = Var("x", F32)
    func = bb.finish_function(
        (x,), x, ret_struct_info=ObjectStructInfo(), is_pure=False, attrs={"num_input": 1}
    )
    assert func.ret_struct_info == ObjectStructInfo()
    assert not func.is_pure and func.attrs == {"num_input": 1}
    assert func.body.blocks == ()
