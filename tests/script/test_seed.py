"""The seed's Before and Expected modules parse, print and re-parse to equal modules."""

from __future__ import annotations

from lazyparams.ir import (
    Call,
    DataflowBlock,
    DataflowVar,
    ExternFunc,
    Function,
    GlobalVar,
    ObjectStructInfo,
    TensorStructInfo,
    TupleGetItem,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.structural import structural_equal
from lazyparams.tir import Block, For, PrimFunc
from tests.script.seed_modules import Before, Expected
from tests.script.util import roundtrip

F32 = "float32"


def test_before_parses_to_the_seed_structure() -> None:
    assert Before.names() == ["transform_layout_IOHW_to_OIHW", "main_transform_params"]
    main = Before["main_transform_params"]
    assert isinstance(main, Function) and main.is_pure
    (param,) = main.params
    assert isinstance(param.struct_info, TupleStructInfo) and len(param.struct_info.fields) == 2
    (block,) = main.body.blocks
    assert isinstance(block, DataflowBlock)
    lv, lv1, lv2, gv = (b.var for b in block.bindings)
    assert [type(v) for v in (lv, lv1, lv2, gv)] == [DataflowVar, DataflowVar, DataflowVar, Var]
    assert isinstance(block.bindings[0].value, TupleGetItem) and block.bindings[0].value.index == 1
    call = block.bindings[2].value
    assert isinstance(call, Call) and isinstance(call.args[0], GlobalVar)
    assert call.args[0] is Before.get_global_var("transform_layout_IOHW_to_OIHW")
    assert lv2.struct_info == TensorStructInfo((16, 3, 3, 3), F32)  # inferred, unannotated
    assert main.body.body is gv


def test_the_kernel_is_a_grid_of_four_loops_around_one_block() -> None:
    kernel = Before["transform_layout_IOHW_to_OIHW"]
    assert isinstance(kernel, PrimFunc)
    loops, stmt = [], kernel.body
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    assert [loop.extent.value for loop in loops] == [16, 3, 3, 3]  # type: ignore[attr-defined]
    assert isinstance(stmt, Block) and stmt.name == "layout_transform"
    assert [iv.value for iv in stmt.iter_vars] == [loop.loop_var for loop in loops]
    assert "".join(iv.kind for iv in stmt.iter_vars) == "SSSS"


def test_expected_parses_extern_calls_and_kills() -> None:
    main = Expected["main_transform_params"]
    assert isinstance(main, Function) and main.params == ()
    bindings = main.bindings()
    first = bindings[0].value
    assert isinstance(first, Call) and isinstance(first.op, ExternFunc)
    assert first.op.global_symbol == "get_item" and first.sinfo_args == (ObjectStructInfo(),)
    assert bindings[2].var.struct_info == TupleStructInfo(())
    assert main.ret_struct_info == TupleStructInfo((ObjectStructInfo(), ObjectStructInfo()))


def test_seed_modules_round_trip() -> None:
    roundtrip(Before)
    roundtrip(Expected)


def test_before_and_expected_differ() -> None:
    assert not structural_equal(Before, Expected)
    assert not structural_equal(Before, Expected, map_free_vars=True)
