"""Model modules for LiftTransformParams checks against TVM, one function each (the scenarios
of TVM's test_transform_lift_transform_params.py, small): weights with symbolic dims, a
weight-free value, tuples of weights, a lifting barrier, a runtime shape alone, a call_tir
layout change, a weight shape defining a dim, a dim the weights use but do not define, an
if/else choosing a weight (TVM's test_condition)."""

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
class LoraOutsideDataflow:
    """TVM's test_lift_transform_is_idempotent module: the folding outside any dataflow block."""

    @R.function
    def main(
        state: R.Tensor(["batch_size", 8], "float32"),
        base: R.Tensor([8, 8], "float32"),
        lora_a: R.Tensor([8, "lora_rank"], "float32"),
        lora_b: R.Tensor(["lora_rank", 8], "float32"),
    ):
        R.func_attr({"num_input": 1})
        folded = base + R.matmul(lora_a, lora_b)
        output = R.matmul(state, folded)
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


@I.ir_module
class Basic:
    """TVM's test_basic: a call_tir layout change of one weight (its block's regions inferred),
    the other weight passed through."""

    @T.prim_func
    def transpose(w1: T.Buffer((3, 4), "float32"), out: T.Buffer((4, 3), "float32")):
        for i, j in T.grid(4, 3):
            with T.block("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = w1[vj, vi]

    @R.function
    def main(
        x: R.Tensor((2, 4), "float32"),
        w1: R.Tensor((3, 4), "float32"),
        w2: R.Tensor((3, 3), "float32"),
    ) -> R.Tensor((2, 3), "float32"):
        R.func_attr({"num_input": 1})
        cls = Basic
        with R.dataflow():
            w1_transformed = R.call_tir(cls.transpose, (w1,), out_sinfo=R.Tensor((4, 3), "float32"))
            y1 = R.matmul(x, w1_transformed)
            y2 = R.matmul(y1, w2)
            R.output(y2)
        return y2


@I.ir_module
class RuntimeZeros:
    """TVM's test_symbolic_var_2: a PrimFunc of symbolic shape fills a tensor whose dim only
    the runtime shape defines; nothing lifts."""

    @T.prim_func
    def zeros(var_out: T.handle):
        n = T.int64()
        out = T.match_buffer(var_out, (n, n), "float32")
        for i, j in T.grid(n, n):
            with T.block("fill"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = T.float32(0)

    @R.function
    def main(shape: R.Shape(["n"])) -> R.Shape(["n"]):
        R.func_attr({"num_input": 1})
        n = T.int64()
        cls = RuntimeZeros
        with R.dataflow():
            zeros = R.call_tir(cls.zeros, (), out_sinfo=R.Tensor((n, n), "float32"))
            R.output()
        return shape


@I.ir_module
class ShapeWeight:
    """TVM's test_symbolic_var_from_shape: a weight `R.Shape` defines a dim the model still
    needs after its slice of B is lifted."""

    @T.prim_func(private=True)
    def slice(rows: T.Buffer((16, 16), "int32"), index: T.int64, row: T.Buffer((16,), "int32")):
        for j in range(16):
            with T.block("take"):
                vj = T.axis.remap("S", [j])
                row[vj] = rows[index, vj]

    @R.function
    def main(
        A: R.Tensor([16, 16], "int32"),
        B: R.Tensor([16, 16], "int32"),
        shape: R.Shape(["slice_index"]),
    ) -> R.Tensor([16], "int32"):
        R.func_attr({"num_input": 1})
        slice_index = T.int64()
        cls = ShapeWeight
        with R.dataflow():
            B_slice = R.call_tir(
                cls.slice, (B, R.prim_value(slice_index)), out_sinfo=R.Tensor([16], "int32")
            )
            A_slice = R.call_tir(
                cls.slice, (A, R.prim_value(slice_index)), out_sinfo=R.Tensor([16], "int32")
            )
            A_scale = R.multiply(A_slice, B_slice)
            R.output(A_scale)
        return A_scale


@I.ir_module
class ParamShape:
    """TVM's test_symbolic_var_in_param_shape: the weights' dim m lifts, the input's n stays."""

    @R.function
    def main(
        x: R.Tensor((2, "n"), "float32"),
        w1: R.Tensor(("m", 2), "float32"),
        w2: R.Tensor(("m", 2), "float32"),
    ) -> R.Tensor(("m", "n"), "float32"):
        R.func_attr({"num_input": 1})
        m = T.int64()
        n = T.int64()
        with R.dataflow():
            zeros = R.zeros((n, n), "float32")
            w1_1 = R.add(w1, R.const(1, "float32"))
            y1 = R.matmul(w1_1, x)
            y2 = R.matmul(w2, x)
            y = R.add(y1, y2)
            R.output(y)
        return y


@I.ir_module
class ProductDim:
    """TVM's test_symbolic_var_defined_in_params_but_used_in_weights: the weight's shape
    `m * n` uses dims only the input defines, so nothing of it lifts."""

    @R.function
    def main(
        x: R.Tensor(["m", "n"], "float32"), weight: R.Tensor(["m * n"], "float32")
    ) -> R.Tensor(["m", "n"], "float32"):
        m = T.int64()
        n = T.int64()
        R.func_attr({"num_input": 1})
        with R.dataflow():
            shifted = R.add(weight, R.const(1, "float32"))
            grid = R.reshape(shifted, [m, n])
            output = R.multiply(x, grid)
            R.output(output)
        return output


SCENARIOS: dict[str, IRModule] = {
    "condition": Condition,
    "lora": Lora,
    "lora_outside_dataflow": LoraOutsideDataflow,
    "shared_ones": SharedOnes,
    "tuples": Tuples,
    "barrier": Barrier,
    "runtime_shape": RuntimeShape,
    "basic": Basic,
    "runtime_zeros": RuntimeZeros,
    "shape_weight": ShapeWeight,
    "param_shape": ParamShape,
    "product_dim": ProductDim,
}
