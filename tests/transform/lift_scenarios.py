"""Model modules for LiftTransformParams checks against TVM: weights with symbolic dims, a
weight-free value, tuples of weights, a lifting barrier, a runtime shape alone, an if/else
choosing a weight (TVM's test_condition)."""

from __future__ import annotations

from lazyparams.ir import IRModule
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T


@I.ir_module
class Lora:
    @R.function
    def main(
        state: R.Tensor(["batch_size", 8], "float32"),
        base: R.Tensor([8, 8], "float32"),
        lora_a: R.Tensor([8, "lora_rank"], "float32"),
        lora_b: R.Tensor(["lora_rank", 8], "float32"),
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            delta = R.matmul(lora_a, lora_b)
            folded = R.add(base, delta)
            output = R.matmul(state, folded)
            R.output(output)
        return output


@I.ir_module
class SharedOnes:
    @R.function
    def main(a: R.Tensor([16], "int32"), b: R.Tensor([16], "int32")):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            offset = R.ones([16], "int32")
            a_offset = R.add(a, offset)
            b_offset = R.add(b, offset)
            output = R.multiply(a_offset, b_offset)
            R.output(output)
        return output


@I.ir_module
class Tuples:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (2, 4), "float32"
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            inner = (w,)
            got = inner[0]
            a = R.matmul(x, got)
            b = R.matmul(a, w)
            R.output(b)
        return b


@I.ir_module
class Barrier:
    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w_t = R.permute_dims(w, [1, 0])
            stopped = R.builtin.stop_lift_params(w_t)
            shifted = R.add(stopped, R.const(1, "float32"))
            y = R.matmul(x, shifted)
            R.output(y)
        return y


@I.ir_module
class RuntimeShape:
    @R.function
    def main(shape: R.Shape(["n"])) -> R.Shape(["n"]):
        R.func_attr({"num_input": 1})
        n = T.int64()
        with R.dataflow():
            zeros = R.zeros((n, n), "float32")
            R.output()
        return shape


@I.ir_module
class Condition:
    @R.function
    def main(
        x: R.Tensor((1, 16, 224, 224), "float32"),
        w1: R.Tensor((16, 16, 3, 3), "float32"),
        w2: R.Tensor((16, 16, 3, 3), "float32"),
        cond: R.Tensor((), "bool"),
    ) -> R.Tensor((1, 16, 224, 224), "float32"):
        R.func_attr({"num_input": 1})
        if cond:
            w = w1
        else:
            w = w2
        with R.dataflow():
            conv1 = R.nn.conv2d(x, w, padding=(1, 1), data_layout="NCHW", kernel_layout="OIHW")
            R.output(conv1)
        return conv1


SCENARIOS: dict[str, IRModule] = {
    "condition": Condition,
    "lora": Lora,
    "shared_ones": SharedOnes,
    "tuples": Tuples,
    "barrier": Barrier,
    "runtime_shape": RuntimeShape,
}
