"""The traced module's shape, the params mapping, tensor attributes, inputs and outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import TraceError
from lazyparams.frontend import Tensor, ops, trace
from lazyparams.ir import (
    BindingBlock,
    Call,
    Constant,
    Function,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    assert_structural_equal,
)
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R

INPUTS = {
    "model.layers.0.q.weight": ((8, 4), "float32"),
    "model.layers.0.k.weight": ((8, 4), np.float32),
    "lm_head": ((3, 4), np.dtype("float16")),
}


def _function(mod: Any) -> Function:
    func = mod["transform_params"]
    assert isinstance(func, Function)
    return func


def test_module_has_one_function_with_a_tuple_param_and_recorded_names() -> None:
    def fn(p: Any) -> dict[str, Any]:
        qk = ops.concat([p["model.layers.0.q.weight"], p["model.layers.0.k.weight"]])
        return {"qk": qk.T, "head": p["lm_head"]}

    mod = trace(fn, INPUTS)
    assert mod.names() == ["transform_params"]
    func = _function(mod)
    (params,) = func.params
    assert params.name_hint == "params"
    assert params.struct_info == TupleStructInfo(
        (
            TensorStructInfo((8, 4), "float32"),
            TensorStructInfo((8, 4), "float32"),
            TensorStructInfo((3, 4), "float16"),
        )
    )
    assert func.attrs["input_names"] == tuple(INPUTS)
    assert func.attrs["output_names"] == ("qk", "head")
    assert func.is_pure
    assert func.ret_struct_info == TupleStructInfo(
        (TensorStructInfo((4, 16), "float32"), TensorStructInfo((3, 4), "float16"))
    )
    (block,) = func.body.blocks
    assert type(block) is BindingBlock
    loads = [b for b in block.bindings if isinstance(b.value, TupleGetItem)]
    assert [b.value.index for b in loads] == [0, 1, 2]
    assert all(b.value.tuple_value is params for b in loads)
    assert block.bindings[: len(loads)] == tuple(loads), "loads come first"
    assert [b.var.name_hint for b in loads] == [
        "model_layers_0_q_weight",
        "model_layers_0_k_weight",
        "lm_head",
    ]
    ops_called = [b.value.op.name for b in block.bindings if isinstance(b.value, Call)]
    assert ops_called == ["concat", "permute_dims"]
    result = func.body.body
    assert isinstance(result, Var)
    assert isinstance(block.bindings[-1], VarBinding) and block.bindings[-1].var is result
    assert isinstance(block.bindings[-1].value, Tuple)


def test_inputs_bind_in_input_order_whatever_order_they_are_read_and_unused_ones_not_at_all() -> (
    None
):
    def fn(p: Any) -> dict[str, Any]:
        return {"b": p["lm_head"] * 2.0, "a": p["model.layers.0.q.weight"] + 1.0}

    func = _function(trace(fn, INPUTS))
    loads = [b.value.index for b in func.bindings() if isinstance(b.value, TupleGetItem)]
    assert loads == [0, 2]
    assert len(func.params[0].struct_info.fields) == 3  # the param still holds every input
    assert func.attrs["input_names"] == tuple(INPUTS)


def test_reading_an_input_twice_binds_it_once() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["lm_head"] + p["lm_head"], "y": p["lm_head"]}

    func = _function(trace(fn, INPUTS))
    assert sum(isinstance(b.value, TupleGetItem) for b in func.bindings()) == 1


def test_params_is_a_read_only_mapping_of_tensors() -> None:
    seen: dict[str, Any] = {}

    def fn(p: Any) -> dict[str, Any]:
        seen["keys"] = list(p.keys())
        seen["len"] = len(p)
        seen["in"] = ("lm_head" in p, "missing" in p)
        seen["get"] = p.get("missing", "default")
        seen["items"] = [(k, v.shape, v.dtype) for k, v in p.items()]
        with pytest.raises(TraceError, match="read-only"):
            p["lm_head"] = p["lm_head"]
        assert not hasattr(p, "update")
        return {"head": p["lm_head"]}

    trace(fn, INPUTS)
    assert seen["keys"] == list(INPUTS)
    assert seen["len"] == 3
    assert seen["in"] == (True, False)
    assert seen["get"] == "default"
    assert seen["items"] == [
        ("model.layers.0.q.weight", (8, 4), "float32"),
        ("model.layers.0.k.weight", (8, 4), "float32"),
        ("lm_head", (3, 4), "float16"),
    ]


def test_tensor_attributes_follow_numpy() -> None:
    seen: dict[str, Any] = {}

    def fn(p: Any) -> dict[str, Any]:
        w = p["model.layers.0.q.weight"]
        seen.update(
            shape=w.shape,
            dtype=w.dtype,
            ndim=w.ndim,
            size=w.size,
            nbytes=w.nbytes,
            len=len(w),
            rows=len(list(w)),
            np_shape=np.shape(w),
            np_ndim=np.ndim(w),
            np_size=np.size(w),
            t_shape=w.T.shape,
            is_tensor=isinstance(w, Tensor),
            repr=repr(w),
        )
        return {"w": w}

    trace(fn, INPUTS)
    assert seen["shape"] == (8, 4) and seen["np_shape"] == (8, 4) and seen["t_shape"] == (4, 8)
    assert seen["dtype"] == "float32" and isinstance(seen["dtype"], str)
    assert seen["dtype"] == np.float32 and seen["dtype"] == np.dtype("float32")
    assert seen["dtype"] != np.float16 and seen["dtype"] != "float16"
    assert seen["dtype"] != "no such dtype" and seen["dtype"] != 3
    assert {seen["dtype"]: 1}["float32"] == 1
    assert seen["ndim"] == 2 == seen["np_ndim"]
    assert seen["size"] == 32 == seen["np_size"]
    assert seen["nbytes"] == 128
    assert seen["len"] == 8 == seen["rows"]
    assert seen["is_tensor"]
    assert "(8, 4)" in seen["repr"]


def test_views_in_numpy_add_no_binding() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["lm_head"]
        same = w.reshape(3, 4).astype(np.float16).transpose(0, 1)[:, :][...]
        assert same is w
        return {"w": same}

    func = _function(trace(fn, INPUTS))
    assert [type(b.value).__name__ for b in func.bindings()] == ["TupleGetItem", "Tuple"]


def test_outputs_may_be_inputs_constants_and_repeats() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["lm_head"]
        return {"w": w, "w2": w, "c": np.arange(3, dtype=np.int64), "s": np.float32(1.5)}

    func = _function(trace(fn, INPUTS))
    out = func.bindings()[-1].value
    assert isinstance(out, Tuple)
    w, w2, c, s = out.fields
    assert w is w2 and isinstance(w, Var)
    assert isinstance(c, Constant) and c.data.tolist() == [0, 1, 2]
    assert isinstance(s, Constant) and s.data.dtype == np.float32 and s.data.shape == ()


def test_a_checkpoint_source_is_any_object_listing_names_and_infos() -> None:
    class Info:
        def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
            self.shape, self.dtype, self.nbytes = shape, dtype, 0

    class Source:
        loaded = False

        def names(self) -> list[str]:
            return ["b", "a"]

        def info(self, name: str) -> Info:
            return Info((2, 3), "bfloat16") if name == "a" else Info((5,), "int8")

        def load(self, name: str) -> np.ndarray:
            Source.loaded = True
            raise AssertionError("tracing must not read data")

    func = _function(trace(lambda p: {"a": p["a"].T}, Source()))
    assert func.attrs["input_names"] == ("b", "a")
    assert func.params[0].struct_info == TupleStructInfo(
        (TensorStructInfo((5,), "int8"), TensorStructInfo((2, 3), "bfloat16"))
    )
    assert not Source.loaded


def test_inputs_may_be_arrays_or_shape_dtype_pairs() -> None:
    inputs = {"x": np.zeros((2, 2), np.int16), "y": ([3], "float32"), "z": ((), "float64")}
    func = _function(trace(lambda p: {"x": p["x"], "z": p["z"]}, inputs))
    assert func.params[0].struct_info == TupleStructInfo(
        (
            TensorStructInfo((2, 2), "int16"),
            TensorStructInfo((3,), "float32"),
            TensorStructInfo((), "float64"),
        )
    )


def test_the_function_name_is_configurable() -> None:
    mod = trace(lambda p: {"x": p["lm_head"]}, INPUTS, name="convert")
    assert mod.names() == ["convert"]


def test_tensors_of_another_trace_or_of_a_finished_trace_are_refused() -> None:
    kept: list[Any] = []

    def first(p: Any) -> dict[str, Any]:
        kept.append(p["lm_head"])
        return {"x": p["lm_head"]}

    trace(first, INPUTS)
    with pytest.raises(TraceError, match="trace has ended"):
        trace(lambda p: {"x": kept[0] * 2.0}, INPUTS)

    def nested(p: Any) -> dict[str, Any]:
        outer = p["lm_head"]
        with pytest.raises(TraceError, match="same trace"):
            trace(lambda q: {"y": q["lm_head"] + outer}, INPUTS)
        return {"x": outer}

    trace(nested, INPUTS)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([("x", ((2,), "float32"))], "expected inputs as a mapping"),
        ({"x": ((2, -1), "float32")}, "non-negative ints, got"),
        ({"x": (("n", 2), "float32")}, "non-negative ints, got"),
        ({"x": ((2,), "float12")}, "expected a dtype"),
        ({"x": (2,)}, "expected \\(shape, dtype\\)"),
        ({3: ((2,), "float32")}, "expected input names as str"),
    ],
)
def test_bad_inputs_are_refused(inputs: Any, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        trace(lambda p: {}, inputs)


def test_creation_ops_need_a_running_trace() -> None:
    with pytest.raises(TraceError, match="inside a function run by trace"):
        ops.zeros((2,), "float32")


# The module in the script syntax -----------------------------------------------------------


@I.ir_module
class Expected:
    @R.function
    def transform_params(
        params: R.Tuple(R.Tensor((4, 6), dtype="float32"), R.Tensor((4, 6), dtype="float32")),
    ) -> R.Tuple(R.Tensor((8, 6), dtype="float32"), R.Tensor((6, 4), dtype="float16")):
        R.func_attr({"input_names": ("q", "k"), "output_names": ("qk", "qT")})
        q: R.Tensor((4, 6), dtype="float32") = params[0]
        k: R.Tensor((4, 6), dtype="float32") = params[1]
        lv: R.Tensor((8, 6), dtype="float32") = R.concat((q, k), axis=0)
        lv1: R.Tensor((6, 4), dtype="float32") = R.permute_dims(q, axes=[1, 0])
        lv2: R.Tensor((6, 4), dtype="float16") = R.astype(lv1, dtype="float16")
        gv = (lv, lv2)
        return gv


def test_traced_module_equals_the_module_written_in_script() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"qk": ops.concat([p["q"], p["k"]]), "qT": p["q"].T.astype(np.float16)}

    mod = trace(fn, {"q": ((4, 6), "float32"), "k": ((4, 6), "float32")})
    assert_structural_equal(mod, Expected, map_free_vars=True)


def test_traced_module_prints_and_parses_back() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.layers.0.q.weight"]
        q, scale = ops.quantize_int8(w.T)
        parts = ops.split(w, [1, 3])
        sliced = w[1:, ::-1] * 2.0 + np.arange(4, dtype=np.float32)
        return {"q": q, "s": scale, "x": sliced, "c": np.arange(3, dtype=np.int8), "p": parts[1]}

    mod = trace(fn, INPUTS)
    assert_structural_equal(parse(mod.script()), mod)


def test_names_that_are_not_identifiers_still_print_and_parse() -> None:
    inputs = {"class": ((2,), "float32"), "0.weight": ((2,), "float32"), "": ((2,), "float32")}

    def fn(p: Any) -> dict[str, Any]:
        return {"def": p["class"] + p["0.weight"] * p[""]}

    mod = trace(fn, inputs)
    names = [b.var.name_hint for b in _function(mod).bindings()[:3]]
    assert names == ["class_", "w_0_weight", "w"]
    assert_structural_equal(parse(mod.script()), mod)
