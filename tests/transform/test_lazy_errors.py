"""What the lazy passes cannot express, or are given wrongly, fails with a clear message."""

from __future__ import annotations

import pytest

from lazyparams.errors import TransformError
from lazyparams.ir import DataflowVar, Var
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyGetInput, LazySetOutput, LazyTransformParams


@I.ir_module
class Module:
    @R.function
    def main_transform_params(
        x: R.Tensor((2,), "float32"), params: R.Tuple(R.Tensor((2,), "float32"))
    ):
        R.func_attr({"num_input": 1})
        lv = R.add(x, params[0])
        return (lv,)

    @T.prim_func
    def kernel(a: T.Buffer((2,), "float32")):
        for i in T.grid(2):
            with T.block("k"):
                vi = T.axis.remap("S", [i])
                a[vi] = T.float32(0)


def test_the_weight_tuple_used_whole_is_refused() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            lv = R.call_packed("inspect", params, sinfo_args=(R.Object,))
            return (lv,)

    message = (
        "LazyTransformParams: function 'main_transform_params', binding 'lv': expected the "
        "weight tuple 'params' to be read only as params\\[i\\], got a use of the whole tuple"
    )
    with pytest.raises(TransformError, match=message):
        LazyTransformParams()(Before)


def test_bad_extern_names_are_refused() -> None:
    with pytest.raises(TransformError, match="expected fget_item to be an extern name or None"):
        LazyTransformParams(fget_item=3)  # type: ignore[arg-type]
    with pytest.raises(TransformError, match="expected fset_item to be an extern name or None"):
        LazyTransformParams(fset_item="")
    with pytest.raises(TransformError, match="expected fget_item or fset_item"):
        LazyTransformParams(fget_item=None, fset_item=None)


def test_bad_extra_params_are_refused() -> None:
    with pytest.raises(TransformError, match="expected extra_get_item_params to hold"):
        LazyTransformParams(extra_get_item_params=["loader"])  # type: ignore[list-item]
    with pytest.raises(TransformError, match="expected extra_set_item_params to hold"):
        LazyTransformParams(extra_set_item_params=[DataflowVar("saver", R.Object)])
    with pytest.raises(TransformError, match="expected extra_get_item_params to be a list"):
        LazyTransformParams(extra_get_item_params=Var("loader", R.Object))  # type: ignore[arg-type]
    x = Module["main_transform_params"].params[0]
    message = "expected extra params that are not already params, got 'x'"
    with pytest.raises(TransformError, match=message):
        LazyTransformParams(extra_get_item_params=[x])(Module)


def test_unknown_or_non_relax_function_names_are_refused() -> None:
    for lazy_pass in (LazyTransformParams, LazyGetInput, LazySetOutput):
        with pytest.raises(TransformError, match="expected a function named 'nope', got a module"):
            lazy_pass(func_names=["nope"])(Module)
        with pytest.raises(TransformError, match="expected 'kernel' to be a Relax function"):
            lazy_pass(func_names=["kernel"])(Module)
        with pytest.raises(TransformError, match="expected func_names to be a list of names"):
            lazy_pass(func_names="main_transform_params")


def test_a_bad_num_input_is_refused() -> None:
    bad = Module["main_transform_params"].with_attr("num_input", 5)
    module = Module.with_function("main_transform_params", bad)
    message = "function 'main_transform_params': expected num_input between 0 and 2, got 5"
    for lazy_pass in (LazyTransformParams(), LazyGetInput(), LazySetOutput()):
        with pytest.raises(TransformError, match=message):
            lazy_pass(module)
