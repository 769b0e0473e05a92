"""ToNonDataflow: dataflow blocks become one plain block, DataflowVars become Vars."""

from __future__ import annotations

from lazyparams.ir import DataflowBlock, DataflowVar
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import ToNonDataflow
from tests.transform.harness import check_pass


def test_blocks_merge_and_dataflow_vars_become_vars() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((3, 2), "float16"):
            with R.dataflow():
                lv = R.permute_dims(x, axes=[1, 0])
                gv = R.astype(lv, "float16")
                R.output(gv)
            lv1 = R.add(gv, gv)
            with R.dataflow():
                lv2 = R.multiply(lv1, lv1)
                gv1 = R.add(lv2, gv)
                R.output(gv1)
            return gv1

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((3, 2), "float16"):
            lv = R.permute_dims(x, axes=[1, 0])
            gv = R.astype(lv, "float16")
            lv1 = R.add(gv, gv)
            lv2 = R.multiply(lv1, lv1)
            gv1 = R.add(lv2, gv)
            return gv1

    after = check_pass(ToNonDataflow(), Before, Expected)
    func = after["main"]
    assert len(func.body.blocks) == 1
    assert not any(isinstance(b, DataflowBlock) for b in func.body.blocks)
    assert not any(isinstance(b.var, DataflowVar) for b in func.bindings())


def test_a_function_without_dataflow_is_kept_as_is() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            lv = R.add(x, x)
            return lv

    assert ToNonDataflow()(Before)["main"] is Before["main"]
