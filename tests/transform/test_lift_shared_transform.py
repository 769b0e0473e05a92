"""LiftTransformParams(shared_transform=...): one `transform_params` for several model
functions, holding only the work they all do alike; each function, run on its outputs, gives
what it gave on the raw weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import TransformError
from lazyparams.ir import Function, IRModule, assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import LiftTransformParams
from tests.transform.harness import check_pass, same_bits

SHARED = LiftTransformParams(shared_transform=True)


def check_shared(before: IRModule, after: IRModule, names: list[str]) -> None:
    """Every function in `names`, on transform_params' outputs, equals itself on the weights."""
    rng = np.random.default_rng(0)
    first = before[names[0]]
    assert isinstance(first, Function)
    weights = tuple(rng.standard_normal(_shape(p)).astype("float32") for p in first.params[1:])
    x = rng.standard_normal(_shape(first.params[0])).astype("float32")
    vm = VirtualMachine(after)
    transformed = vm["transform_params"](weights)
    for name in names:
        expected = VirtualMachine(before)[name](x, *weights)
        assert same_bits(vm[name](x, *transformed), expected), name


def _shape(param: Any) -> tuple[int, ...]:
    return tuple(int(d.value) for d in param.struct_info.shape)


def _pair(second_body: str = "same") -> IRModule:
    """func_a and func_b over the same two weights; func_b transposes w2 inside a private
    function when `second_body` is "fused", so only w1's transpose is common to both."""

    @I.ir_module
    class Same:
        @R.function
        def func_a(
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
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w2_t = R.permute_dims(w2)
                w1_t = R.permute_dims(w1)
                y1 = R.matmul(x, w1_t)
                y2 = R.matmul(x, w2_t)
                out = R.multiply(y1, y2)
                R.output(out)
            return out

    @I.ir_module
    class Fused:
        @R.function
        def func_a(
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
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            cls = Fused
            with R.dataflow():
                w1_t = R.permute_dims(w1)
                y1 = R.matmul(x, w1_t)
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

    return Same if second_body == "same" else Fused


def test_work_every_function_does_alike_moves_into_one_transform() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def func_a(
            x: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
            w2_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
                y2 = R.matmul(x, w2_t)
                out = R.add(y1, y2)
                R.output(out)
            return out

        @R.function
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
            w2_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
                y2 = R.matmul(x, w2_t)
                out = R.multiply(y1, y2)
                R.output(out)
            return out

        @R.function
        def transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w1 = params[0]
                w1_t = R.permute_dims(w1)
                w2 = params[1]
                w2_t = R.permute_dims(w2)
                gv = (w1_t, w2_t)
                R.output(gv)
            return gv

    after = check_pass(SHARED, _pair(), Expected)
    check_shared(_pair(), after, ["func_a", "func_b"])


def test_the_first_function_by_name_orders_the_shared_outputs() -> None:
    before = _pair()
    renamed = IRModule({"func_b": before["func_a"], "func_a": before["func_b"]})
    after = SHARED(renamed)
    transform = after["transform_params"]
    assert isinstance(transform, Function)
    loads = [b.value.index for b in transform.bindings() if hasattr(b.value, "index")]
    assert loads == [1, 0], "func_a (the former func_b) transposes w2 first"
    check_shared(renamed, after, ["func_a", "func_b"])


def test_work_only_some_functions_do_stays_in_them() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def func_a(
            x: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
                w2_t = R.permute_dims(w2)
                y2 = R.matmul(x, w2_t)
                out = R.add(y1, y2)
                R.output(out)
            return out

        @R.function
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            cls = Expected
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
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

        @R.function
        def transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w1 = params[0]
                w1_t = R.permute_dims(w1)
                w2 = params[1]
                gv = (w2, w1_t)
                R.output(gv)
            return gv

    after = check_pass(SHARED, _pair("fused"), Expected)
    check_shared(_pair("fused"), after, ["func_a", "func_b"])


def test_functions_alike_after_lifting_are_all_kept() -> None:
    before = _pair()
    twin = IRModule({"func_a": before["func_a"], "func_c": before["func_a"]})
    after = SHARED(twin)
    assert sorted(after.names()) == ["func_a", "func_c", "transform_params"]
    check_shared(twin, after, ["func_a", "func_c"])


def test_a_list_of_names_shares_among_those_and_leaves_the_others_alone() -> None:
    before = _pair("fused")
    third = _pair()["func_b"]
    mod = before.with_function("func_c", third)
    after = LiftTransformParams(shared_transform=["func_c", "func_a"])(mod)
    assert after["func_b"] is mod["func_b"]
    assert "func_b_transform_params" not in after
    check_shared(mod, after, ["func_a", "func_c"])


def test_a_weight_one_function_does_not_use_still_limits_sharing() -> None:
    """A value lifted by one function alone stays in it, even when the others ignore its
    weight: every function runs on the same transformed weights."""

    @I.ir_module
    class Before:
        @R.function
        def func_a(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w1_t = R.permute_dims(w1)
                w2_t = R.permute_dims(w2)
                out = R.matmul(R.matmul(x, w1_t), w2_t)
                R.output(out)
            return out

        @R.function
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w1_t = R.permute_dims(w1)
                out = R.matmul(x, w1_t)
                R.output(out)
            return out

    after = SHARED(Before)
    func_b = after["func_b"]
    assert isinstance(func_b, Function)
    assert [p.name_hint for p in func_b.params] == ["x", "w2", "w1_t"]
    check_shared(Before, after, ["func_a", "func_b"])


def test_lifting_shared_is_idempotent() -> None:
    once = SHARED(_pair("fused"))
    assert_structural_equal(SHARED(once), once)


def _with_second(params: str) -> IRModule:
    first = _pair()["func_a"]

    @I.ir_module
    class Count:
        @R.function
        def func_b(x: R.Tensor((4, 4), "float32"), w1: R.Tensor((4, 4), "float32")) -> R.Tensor(
            (4, 4), "float32"
        ):
            R.func_attr({"num_input": 1})
            y = R.matmul(x, w1)
            return y

    @I.ir_module
    class Shape:
        @R.function
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((2, 4), "float32"),
        ) -> R.Tensor((4, 2), "float32"):
            R.func_attr({"num_input": 1})
            y = R.matmul(x, R.permute_dims(w2))
            return y

    @I.ir_module
    class Dtype:
        @R.function
        def func_b(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float16"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            y = R.matmul(x, R.astype(w2, "float32"))
            return y

    second = {"count": Count, "shape": Shape, "dtype": Dtype}[params]["func_b"]
    return IRModule({"func_a": first, "func_b": second})


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("count", r"function 'func_b' takes 1 weights \(w1\) and 'func_a' takes 2 \(w1, w2\)"),
        (
            "shape",
            r"weight 1 \(w2\) of function 'func_b' is R.Tensor\(\(2, 4\), \"float32\"\); "
            r"expected R.Tensor\(\(4, 4\), \"float32\"\), as 'func_a' takes it \(w2\)",
        ),
        (
            "dtype",
            r"weight 1 \(w2\) of function 'func_b' is R.Tensor\(\(4, 4\), \"float16\"\); "
            r"expected R.Tensor\(\(4, 4\), \"float32\"\)",
        ),
    ],
)
def test_functions_with_different_weights_cannot_share(kind: str, expected: str) -> None:
    with pytest.raises(TransformError, match=expected):
        SHARED(_with_second(kind))


@pytest.mark.parametrize("option", [[], "func_a", [1], None])
def test_bad_shared_transform_options_are_refused(option: Any) -> None:
    with pytest.raises(TransformError, match="expected shared_transform to be a bool"):
        LiftTransformParams(shared_transform=option)


def test_a_named_function_without_num_input_is_refused() -> None:
    with pytest.raises(TransformError, match="shared_transform names 'nowhere'"):
        LiftTransformParams(shared_transform=["func_a", "nowhere"])(_pair())
