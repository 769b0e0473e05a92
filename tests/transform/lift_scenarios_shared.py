"""Model modules of several functions for LiftTransformParams checks against TVM: the
`shared_transform` scenarios of TVM's test_transform_lift_transform_params.py, small. Each
comes with the `shared_transform` value its scenario uses."""

from __future__ import annotations

from typing import Any

from lazyparams.ir import IRModule
from lazyparams.script import ir as I
from lazyparams.script import relax as R


@I.ir_module
class Multiple:
    """test_multiple_functions: each function with num_input its own transform; func3 has none."""

    @R.function
    def func1(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w1_t = R.permute_dims(w1, [1, 0])
            y = R.matmul(x, w1_t)
            R.output(y)
        return y

    @R.function
    def func2(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((2, 4), "float32")) -> R.Tensor(
        (4, 2), "float32"
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w1_t = R.permute_dims(w1, [1, 0])
            y = R.matmul(x, w1_t)
            R.output(y)
        return y

    @R.function
    def func3(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        with R.dataflow():
            w1_t = R.permute_dims(w1, [1, 0])
            y = R.matmul(x, w1_t)
            R.output(y)
        return y


def _two(first: str, second: str, combine: tuple[str, str]) -> IRModule:
    """func1 and func2 over weights w1, w2: `first` / `second` name which transposes each
    computes ("12": w1_t then w2_t, "21": w2_t first, "1" / "2": one of them), combined with
    `combine` (R.add or R.multiply) when it has both."""
    text = "@I.ir_module\nclass Module:\n"
    for name, order, op in (("func1", first, combine[0]), ("func2", second, combine[1])):
        text += _function(name, order, op)
    from lazyparams.script import parse

    return parse(text)


def _function(name: str, order: str, op: str) -> str:
    head = (
        f"    @R.function\n    def {name}(\n"
        '        x: R.Tensor((4, 4), "float32"),\n'
        '        w1: R.Tensor((4, 4), "float32"),\n'
        '        w2: R.Tensor((4, 4), "float32"),\n'
        '    ) -> R.Tensor((4, 4), "float32"):\n'
        '        R.func_attr({"num_input": 1})\n'
        "        with R.dataflow():\n"
    )
    lines = [f"w{i}_t = R.permute_dims(w{i})" for i in order]
    lines += [f"y{i} = R.matmul(x, w{i}_t)" for i in sorted(order)]
    result = f"R.{op}(y1, y2)" if len(order) == 2 else f"y{order}"
    lines += [f"out = {result}", "R.output(out)"]
    body = "".join(f"            {line}\n" for line in lines)
    return head + body + "        return out\n\n"


@I.ir_module
class Specified:
    """test_share_transform_across_specified_functions: func3 transposes inside a private
    function, so only func1 and func2 share; func3 is left alone."""

    @R.function
    def func1(
        x: R.Tensor((4, 4), "float32"),
        w1: R.Tensor((4, 4), "float32"),
        w2: R.Tensor((4, 4), "float32"),
    ) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            w1_t = R.permute_dims(w1)
            y1 = R.matmul(x, w1_t)
            w2_t = R.permute_dims(w2)
            y2 = R.matmul(x, w2_t)
            out = R.add(y1, y2)
            R.output(out)
        return out

    @R.function
    def func2(
        x: R.Tensor((4, 4), "float32"),
        w1: R.Tensor((4, 4), "float32"),
        w2: R.Tensor((4, 4), "float32"),
    ) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"num_input": 1})
        cls = Specified
        with R.dataflow():
            w1_t = R.permute_dims(w1)
            y1 = R.matmul(x, w1_t)
            y2: R.Tensor((4, 4), "float32") = cls.project(x, w2)
            out = R.add(y1, y2)
            R.output(out)
        return out

    @R.function
    def func3(
        x: R.Tensor((4, 4), "float32"),
        w1: R.Tensor((4, 4), "float32"),
        w2: R.Tensor((4, 4), "float32"),
    ) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"num_input": 1})
        cls = Specified
        with R.dataflow():
            y1: R.Tensor((4, 4), "float32") = cls.project(x, w1)
            y2: R.Tensor((4, 4), "float32") = cls.project(x, w2)
            out = R.add(y1, y2)
            R.output(out)
        return out

    @R.function(private=True)
    def project(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        with R.dataflow():
            w_t = R.permute_dims(w)
            y = R.matmul(x, w_t)
            R.output(y)
        return y


@I.ir_module
class ExistingIdentity:
    """test_lift_transform_when_one_already_exists: an identity transform is there already."""

    @R.function
    def main(
        state: R.Tensor(["batch_size", 8], "float32"),
        base: R.Tensor([8, 8], "float32"),
        lora_a: R.Tensor([8, "lora_rank"], "float32"),
        lora_b: R.Tensor(["lora_rank", 8], "float32"),
    ):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            folded = R.add(base, R.matmul(lora_a, lora_b))
            output = R.matmul(state, folded)
            R.output(output)
        return output

    @R.function
    def main_transform_params(
        model_params: R.Tuple(
            R.Tensor([8, 8], "float32"),
            R.Tensor([8, "lora_rank"], "float32"),
            R.Tensor(["lora_rank", 8], "float32"),
        ),
    ):
        R.func_attr({"num_input": 0})
        return model_params


SHARED_SCENARIOS: dict[str, tuple[IRModule, Any]] = {
    "existing_transform": (ExistingIdentity, False),
    "multiple_functions": (Multiple, False),
    "identical_transforms": (_two("12", "12", ("add", "multiply")), True),
    "different_binding_order": (_two("21", "12", ("add", "multiply")), True),
    "identical_functions": (_two("21", "12", ("add", "add")), True),
    "specified_functions": (Specified, ["func1", "func2"]),
    "unused_parameter": (_two("12", "1", ("add", "add")), True),
    "no_shared_preprocessing": (_two("2", "1", ("add", "add")), True),
}
"""name -> (module, the `shared_transform` its TVM scenario passes)."""
