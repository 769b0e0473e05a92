"""BundleModelParams on the scenarios of TVM's tests: Before/Expected, and the VM gives the
same result with the weights passed as one tuple."""

from __future__ import annotations

import numpy as np

from lazyparams.ir import IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import BundleModelParams, LiftTransformParams
from tests.transform.harness import check_pass, same_bits

A, B, C = (np.full(16, v, "float32") for v in (1.0, 2.0, 4.0))


def _before(num_input: int, dataflow: bool) -> IRModule:
    @I.ir_module
    class Plain:
        @R.function
        def main(
            a: R.Tensor([16], "float32"), b: R.Tensor([16], "float32"), c: R.Tensor([16], "float32")
        ) -> R.Tensor([16], "float32"):
            R.func_attr({"num_input": 1})
            expr = R.add(a, b)
            expr1 = R.add(expr, c)
            return expr1

    @I.ir_module
    class Dataflow:
        @R.function
        def main(
            a: R.Tensor([16], "float32"), b: R.Tensor([16], "float32"), c: R.Tensor([16], "float32")
        ) -> R.Tensor([16], "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                expr = R.add(a, b)
                expr1 = R.add(expr, c)
                R.output(expr1)
            return expr1

    mod = Dataflow if dataflow else Plain
    func = mod["main"]
    return IRModule({"main": func.with_attr("num_input", num_input)})  # type: ignore[union-attr]


def test_basic() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main(
            a: R.Tensor([16], "float32"),
            params: R.Tuple(R.Tensor([16], "float32"), R.Tensor([16], "float32")),
        ) -> R.Tensor([16], "float32"):
            R.func_attr({"num_input": 1})
            b = params[0]
            expr = R.add(a, b)
            c = params[1]
            expr1 = R.add(expr, c)
            return expr1

    before = _before(1, dataflow=False)
    after = check_pass(BundleModelParams(), before, Expected)
    got = VirtualMachine(after)["main"](A, (B, C))
    assert same_bits(got, VirtualMachine(before)["main"](A, B, C))


def test_no_model_params() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main(
            a: R.Tensor([16], "float32"),
            b: R.Tensor([16], "float32"),
            c: R.Tensor([16], "float32"),
            params: R.Tuple(),
        ) -> R.Tensor([16], "float32"):
            R.func_attr({"num_input": 3})
            expr = R.add(a, b)
            expr1 = R.add(expr, c)
            return expr1

    after = check_pass(BundleModelParams(), _before(3, dataflow=False), Expected)
    assert same_bits(VirtualMachine(after)["main"](A, B, C, ()), A + B + C)


def test_dataflow() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main(
            a: R.Tensor([16], "float32"),
            params: R.Tuple(R.Tensor([16], "float32"), R.Tensor([16], "float32")),
        ) -> R.Tensor([16], "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                b = params[0]
                expr = R.add(a, b)
                c = params[1]
                expr1 = R.add(expr, c)
                R.output(expr1)
            return expr1

    after = check_pass(BundleModelParams(), _before(1, dataflow=True), Expected)
    assert same_bits(VirtualMachine(after)["main"](A, (B, C)), A + B + C)


def test_bundled_after_lifting_takes_the_transform_output_as_it_is() -> None:
    before = _before(1, dataflow=True)
    after = BundleModelParams()(LiftTransformParams()(before))
    vm = VirtualMachine(after)
    assert same_bits(vm["main"](A, vm["main_transform_params"]((B, C))), A + B + C)


def test_bundling_is_idempotent() -> None:
    once = BundleModelParams()(_before(1, dataflow=True))
    assert BundleModelParams()(once)["main"] is once["main"]
