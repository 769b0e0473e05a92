"""Errors raised while tracing name the user's file and line and say what was expected."""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest

from lazyparams.errors import LazyParamsError, TraceError
from lazyparams.frontend import ops, trace

INPUTS = {
    "model.q.weight": ((4, 6), "float32"),
    "model.k.weight": ((6, 3), "float32"),
    "half": ((4, 6), "float16"),
    "ints": ((4, 6), "int32"),
}
MARK = "# error here"


def raises_at_marked_line(fn: Any, *patterns: str) -> str:
    """Trace `fn`; the TraceError must name this file and the line carrying MARK."""
    lines, first = inspect.getsourcelines(fn)
    line = first + next(i for i, text in enumerate(lines) if MARK in text)
    with pytest.raises(TraceError) as info:
        trace(fn, INPUTS)
    message = str(info.value)
    assert message.startswith(f"{__file__}:{line}: "), message
    assert MARK in message, "the offending source line is shown"
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in {message!r}"
    return message


# Unknown names ------------------------------------------------------------------------------


def test_unknown_name_suggests_close_names() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        return {"x": w + p["model.q.wieght"]}  # error here

    raises_at_marked_line(
        fn,
        r"params\['model.q.wieght'\]",
        "expected one of the 4 input names",
        "did you mean 'model.q.weight'",
    )


def test_unknown_name_without_close_names() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["zzz"]}  # error here

    message = raises_at_marked_line(fn, "got 'zzz'")
    assert "did you mean" not in message


# Wrong shapes and dtypes ----------------------------------------------------------------------


def test_operands_that_do_not_broadcast() -> None:
    def fn(p: Any) -> dict[str, Any]:
        q, k = p["model.q.weight"], p["model.k.weight"]
        return {"x": q + k}  # error here

    raises_at_marked_line(fn, r"operator \+", r"R\.add", "expected", "got")


def test_operands_of_two_dtypes() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"] * p["half"]}  # error here

    raises_at_marked_line(fn, r"R\.multiply", "float16", "float32")


def test_reshape_to_the_wrong_element_count() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        y = w.reshape(5, 5)  # error here
        return {"y": y}

    raises_at_marked_line(fn, "reshape", "expected a shape of 24 elements, got \\(5, 5\\)")


def test_concat_of_mismatched_shapes() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": ops.concat([p["model.q.weight"], p["model.k.weight"]])}  # error here

    raises_at_marked_line(fn, r"R\.concat", "expected")


def test_quantize_int4_with_a_group_size_not_dividing_k() -> None:
    def fn(p: Any) -> dict[str, Any]:
        packed, _ = ops.quantize_int4(p["model.q.weight"], group_size=4)  # error here
        return {"p": packed}

    raises_at_marked_line(fn, r"R\.quantize_int4", "expected")


def test_matmul_of_mismatched_inner_dims() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"] @ p["model.q.weight"]}  # error here

    raises_at_marked_line(fn, r"R\.matmul", "expected")


def test_transpose_axes_that_are_not_a_permutation() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"].transpose(0, 0)}  # error here

    raises_at_marked_line(fn, "transpose", "expected a permutation of the 2 axes, got \\(0, 0\\)")


def test_split_sections_that_do_not_divide() -> None:
    def fn(p: Any) -> dict[str, Any]:
        parts = ops.split(p["model.q.weight"], 5, axis=1)  # error here
        return {"x": parts[0]}

    raises_at_marked_line(fn, "split", "expected sections dividing axis 1 of size 6, got 5")


def test_index_out_of_range() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"][4]}  # error here

    raises_at_marked_line(fn, "expected an index in \\[-4, 4\\) for axis 0 of size 4, got 4")


def test_too_many_indices() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"][0, 1, 2]}  # error here

    raises_at_marked_line(fn, "too many indices: expected at most 2 for a 2-d tensor, got 3")


def test_unknown_dtype() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"].astype("float12")}  # error here

    raises_at_marked_line(fn, "astype", "expected a dtype", "got 'float12'")


def test_scalars_that_do_not_fit_the_tensor_dtype() -> None:
    def fractional(p: Any) -> dict[str, Any]:
        return {"x": p["ints"] + 1.5}  # error here

    def too_large(p: Any) -> dict[str, Any]:
        return {"x": p["ints"] * 2**40}  # error here

    raises_at_marked_line(fractional, "expected an integer scalar for a int32 tensor, got 1.5")
    raises_at_marked_line(too_large, "expected a scalar in \\[-2147483648, 2147483647\\]")


# Unsupported operations ------------------------------------------------------------------------


def test_power_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"] ** 2}  # error here

    raises_at_marked_line(fn, r"\*\*", "unsupported operation")


def test_numpy_function_without_a_traced_equivalent() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": np.cumsum(p["model.q.weight"], axis=0)}  # error here

    raises_at_marked_line(fn, "np.cumsum", "unsupported operation", "lazyparams.ops", "concat")


def test_numpy_ufunc_without_a_traced_equivalent() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": np.tanh(p["model.q.weight"])}  # error here

    raises_at_marked_line(fn, "np.tanh", "unsupported operation")


def test_ufunc_keywords_are_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        return {"x": np.add(w, w, dtype=np.float64)}  # error here

    raises_at_marked_line(fn, "np.add", "expected no keyword arguments, got \\['dtype'\\]")


def test_branching_on_a_tensor_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        if w:  # error here
            w = w * 2.0
        return {"x": w}

    raises_at_marked_line(fn, "bool", "unsupported operation", "branch on shapes")


def test_equality_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        return {"x": w * 2.0 if w == 0 else w}  # error here

    raises_at_marked_line(fn, "==", "identity meaning", "ops.equal")


def test_converting_to_numpy_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": np.asarray(p["model.q.weight"])}  # error here

    raises_at_marked_line(fn, "no data while tracing")


def test_integer_true_division_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["ints"] / 2}  # error here

    raises_at_marked_line(fn, "operator /", "expected float tensors for true division, got int32")


def test_boolean_masks_are_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"][np.array([True, False, True, True])]}  # error here

    raises_at_marked_line(fn, "boolean mask indexing")


def test_item_assignment_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        w[0] = 1.0  # error here
        return {"x": w}

    raises_at_marked_line(fn, "item assignment", "immutable")


def test_two_index_arrays_are_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"][[0, 1], [1, 2]]}  # error here

    raises_at_marked_line(fn, "expected at most one index array, got 2")


def test_an_index_array_apart_from_integer_indices_is_unsupported() -> None:
    def fn(p: Any) -> dict[str, Any]:
        t = p["model.q.weight"].reshape(2, 2, 6)
        return {"x": t[[0, 1], :, 0]}  # error here

    raises_at_marked_line(fn, "index in two steps")


# The math ---------------------------------------------------------------------------------------


def test_float_functions_of_ints_are_refused() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": np.sqrt(p["ints"])}  # error here

    raises_at_marked_line(fn, "sqrt", r"R\.sqrt: expected x of a float dtype, got int32")


def test_masks_combine_bool_tensors_only() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["ints"] & 1}  # error here

    raises_at_marked_line(fn, "operator &", r"R\.logical_and: expected x1 of dtype bool, got int32")


def test_comparisons_of_two_dtypes_are_refused() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"] < p["half"]}  # error here

    raises_at_marked_line(
        fn, "operator <", "expected operands of one dtype, got float16 and float32"
    )


def test_where_needs_a_bool_condition() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        return {"x": np.where(w, w, 0.0)}  # error here

    raises_at_marked_line(fn, "where", "expected condition of dtype bool, got float32")


def test_reductions_refuse_repeated_and_out_of_range_axes() -> None:
    def repeated(p: Any) -> dict[str, Any]:
        return {"x": p["model.q.weight"].sum(axis=(1, -1))}  # error here

    def out_of_range(p: Any) -> dict[str, Any]:
        return {"x": np.max(p["model.q.weight"], axis=2)}  # error here

    def not_a_flag(p: Any) -> dict[str, Any]:
        return {"x": ops.min(p["model.q.weight"], keepdims="yes")}  # error here

    raises_at_marked_line(repeated, "sum", r"expected distinct axes, got \(1, -1\)")
    raises_at_marked_line(out_of_range, "max", r"expected an axis in \[-2, 2\), got 2")
    raises_at_marked_line(not_a_flag, "min", "expected keepdims to be True or False, got 'yes'")


def test_numpy_arguments_without_a_traced_meaning_are_refused() -> None:
    def fn(p: Any) -> dict[str, Any]:
        w = p["model.q.weight"]
        return {"x": np.sum(w, axis=0, out=None)}  # error here

    raises_at_marked_line(fn, "np.sum", "unsupported arguments", "out")


# Where the error is reported -------------------------------------------------------------------


def test_the_innermost_user_frame_is_reported() -> None:
    def helper(w: Any) -> Any:
        return w.reshape(7)  # error here

    def fn(p: Any) -> dict[str, Any]:
        return {"x": helper(p["model.q.weight"])}

    first = inspect.getsourcelines(helper)[1]
    with pytest.raises(TraceError, match=rf"test_errors.py:{first + 1}: reshape"):
        trace(fn, INPUTS)


@pytest.mark.parametrize(
    ("result", "pattern"),
    [
        ([1, 2], "expected a non-empty mapping of output name -> tensor"),
        ({}, "expected a non-empty mapping"),
        ({1: np.zeros(2)}, "expected output names as str, got 1"),
        ({"x": 3}, "output 'x': expected a traced tensor or a numpy array, got int"),
        ({"x": np.array(["s"])}, "output 'x': expected a traced tensor or a numpy array"),
    ],
)
def test_bad_outputs_point_at_the_function(result: Any, pattern: str) -> None:
    def fn(p: Any) -> Any:
        return result

    first = inspect.getsourcelines(fn)[1]
    with pytest.raises(TraceError, match=pattern) as info:
        trace(fn, INPUTS)
    assert str(info.value).startswith(f"{__file__}:{first}: return: ")


def test_trace_errors_are_lazyparams_errors_and_user_errors_pass_through() -> None:
    assert issubclass(TraceError, LazyParamsError)

    def fn(p: Any) -> dict[str, Any]:
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        trace(fn, INPUTS)
    # the failed trace left no active tracer behind
    with pytest.raises(TraceError, match="inside a function run by trace"):
        ops.ones((1,), "float32")
