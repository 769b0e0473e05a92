"""Adjacent plain blocks built by the BlockBuilder come out as one block, as the script reads."""

from __future__ import annotations

from lazyparams import op
from lazyparams.ir import BindingBlock, BlockBuilder, DataflowBlock, Tuple, Var
from lazyparams.ir.struct_info import TensorStructInfo


def test_adjacent_plain_blocks_merge_and_dataflow_blocks_stay_apart() -> None:
    x = Var("x", TensorStructInfo((2, 3), "float32"))
    bb = BlockBuilder()
    a = bb.emit(op.permute_dims(x), "a")
    bb.begin_block(False)
    b = bb.emit(op.astype(a, "float16"), "b")
    with bb.dataflow():
        c = bb.emit_output(op.astype(b, "float32"), "c")
    bb.begin_block(False)
    d = bb.emit(op.permute_dims(c), "d")
    func = bb.finish_function((x,), Tuple((d,)))
    kinds = [type(block) for block in func.body.blocks]
    assert kinds == [BindingBlock, DataflowBlock, BindingBlock]
    assert [b.var for b in func.body.blocks[0].bindings] == [a, b]
