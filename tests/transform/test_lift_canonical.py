"""The clean-up LiftTransformParams gives both functions (`lift_canonical`): an output var takes
over its block var's binding, a var-to-var binding goes unless it would put a block-local var
where the block's output is read, a match_cast stays, and only the transform drops unused
bindings."""

from __future__ import annotations

from lazyparams.ir import Function
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import LiftTransformParams
from lazyparams.transform.lift_canonical import canonical
from tests.transform.harness import check_pass

LIFT = LiftTransformParams()


def test_an_output_takes_over_its_var_and_a_match_cast_result_stays_bound() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32"), w: R.Tensor((2,), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                a = R.add(x, w)
                taken = a
                b = R.match_cast(taken, R.Tensor((2,), "float32"))
                out = b
                R.output(out)
            return out

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2,), "float32"), w: R.Tensor((2,), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                a = R.add(x, w)
                b = R.match_cast(a, R.Tensor((2,), "float32"))
                out = b
                R.output(out)
            return out

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2,), "float32")),
        ) -> R.Tuple(R.Tensor((2,), "float32")):
            R.func_attr({"num_input": 0})
            return params

    check_pass(LIFT, Before, Expected)


def test_only_the_transform_drops_what_nothing_reads() -> None:
    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            with R.dataflow():
                unused = R.add(x, x)
                y = R.multiply(x, x)
                out = y
                R.output(out)
            return out

    func = Module["main"]
    assert isinstance(func, Function)
    kept = canonical(func, drop_unused=False)
    dropped = canonical(func, drop_unused=True)
    assert [b.var.name_hint for b in kept.bindings()] == ["unused", "out"]
    assert [b.var.name_hint for b in dropped.bindings()] == ["out"]
