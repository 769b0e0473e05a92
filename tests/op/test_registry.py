"""The op registry as the other layers see it: names, params, purity, normalised attrs."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.errors import StructInfoError
from lazyparams.ir import Call, Tuple, Var, get_op, is_pure_call, op_info, struct_info_of
from lazyparams.ir.prim import IntImm
from lazyparams.ir.struct_info import TensorStructInfo

X = Var("x", TensorStructInfo((4, 8), "float32"))
UNARY = ["abs", "sign", "sqrt", "sin", "cos", "acos", "exp", "log", "negative", "square"]
PAIRS = ["maximum", "minimum", "logical_and", "logical_or"]
PAIRS += ["greater", "greater_equal", "less", "less_equal", "equal", "not_equal"]
REDUCTIONS = ["sum", "max", "min", "mean"]

SIGNATURES = {
    "permute_dims": [("x", "expr"), ("axes", "attr")],
    "reshape": [("x", "expr"), ("shape", "attr")],
    "astype": [("x", "expr"), ("dtype", "attr")],
    "concat": [("tensors", "expr"), ("axis", "attr")],
    "split": [("x", "expr"), ("indices_or_sections", "attr"), ("axis", "attr")],
    "strided_slice": [
        ("x", "expr"),
        ("axes", "attr"),
        ("begin", "attr"),
        ("end", "attr"),
        ("strides", "attr"),
    ],
    "take": [("x", "expr"), ("indices", "expr"), ("axis", "attr")],
    "expand_dims": [("x", "expr"), ("axis", "attr")],
    "add": [("x1", "expr"), ("x2", "expr")],
    "subtract": [("x1", "expr"), ("x2", "expr")],
    "multiply": [("x1", "expr"), ("x2", "expr")],
    "divide": [("x1", "expr"), ("x2", "expr")],
    "matmul": [("x1", "expr"), ("x2", "expr"), ("out_dtype", "attr")],
    **{name: [("x", "expr")] for name in UNARY},
    **{name: [("x1", "expr"), ("x2", "expr")] for name in PAIRS},
    "where": [("condition", "expr"), ("x1", "expr"), ("x2", "expr")],
    **{name: [("x", "expr"), ("axis", "attr"), ("keepdims", "attr")] for name in REDUCTIONS},
    "zeros": [("shape", "attr"), ("dtype", "attr")],
    "ones": [("shape", "attr"), ("dtype", "attr")],
    "quantize_int8": [("x", "expr"), ("axis", "attr")],
    "quantize_int4": [("x", "expr"), ("group_size", "attr")],
    "dequantize_int8": [("q", "expr"), ("scale", "expr"), ("axis", "attr")],
    "dequantize_int4": [("packed", "expr"), ("scale", "expr"), ("group_size", "attr")],
    "call_tir": [("func", "expr"), ("args", "expr"), ("tir_vars", "expr")],
    "vm.kill_object": [("x", "expr")],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_every_op_of_the_conventions_is_registered_in_script_order(name: str) -> None:
    info = op_info(name)
    assert [(p.name, p.kind) for p in info.params] == SIGNATURES[name]
    assert get_op(name) is get_op(name)
    assert info.pure == (name != "vm.kill_object")


def test_optional_attrs_carry_the_documented_defaults() -> None:
    defaults = {
        (name, p.name): p.default
        for name in SIGNATURES
        for p in op_info(name).params
        if p.kind == "attr" and not p.required
    }
    assert defaults == {
        ("permute_dims", "axes"): None,
        ("concat", "axis"): 0,
        ("split", "axis"): 0,
        ("strided_slice", "strides"): None,
        ("take", "axis"): None,
        ("matmul", "out_dtype"): None,
        ("quantize_int8", "axis"): 0,
        ("quantize_int4", "group_size"): 32,
        ("dequantize_int8", "axis"): 0,
        ("dequantize_int4", "group_size"): 32,
        **{(name, "axis"): None for name in REDUCTIONS},
        **{(name, "keepdims"): False for name in REDUCTIONS},
    }


def test_call_tir_keeps_out_sinfo_in_sinfo_args() -> None:
    assert op.SINFO_ARG_KEYWORDS == {"call_tir": "out_sinfo"}


def test_purity_of_calls() -> None:
    assert is_pure_call(op.permute_dims(X))
    assert not is_pure_call(op.kill_object(X))
    assert not is_pure_call(op.call_packed("get_item", op.prim_value(0)))


def test_make_call_fills_defaults_and_turns_lists_into_tuples() -> None:
    call = op.make_call("permute_dims", [X], {"axes": [-1, 0]})
    assert call.op is get_op("permute_dims")
    assert dict(call.attrs) == {"axes": (-1, 0)}  # negative axes kept as written
    assert dict(op.make_call("concat", [Tuple((X,))]).attrs) == {"axis": 0}
    reshape = op.make_call("reshape", [X], {"shape": [IntImm(2), 16]})
    assert reshape.attrs["shape"] == (IntImm(2), IntImm(16))


def test_constructors_and_make_call_agree() -> None:
    a = op.split(X, [1, 3], axis=-1)
    b = op.make_call("split", [X], {"indices_or_sections": (1, 3), "axis": -1})
    assert dict(a.attrs) == dict(b.attrs) == {"indices_or_sections": (1, 3), "axis": -1}


def test_inference_reads_a_hand_built_call_with_lists_and_missing_defaults() -> None:
    call = Call(get_op("permute_dims"), (X,), {"axes": [1, 0]})
    assert struct_info_of(call) == TensorStructInfo((8, 4), "float32")
    bare = Call(get_op("concat"), (op.concat([X]).args[0],), {})
    assert struct_info_of(bare) == TensorStructInfo((4, 8), "float32")


def test_normalize_attrs_is_the_parser_entry_point() -> None:
    assert op.normalize_attrs("astype", {"dtype": "float8_e4m3"}) == {"dtype": "float8_e4m3fn"}
    assert op.normalize_attrs("strided_slice", {"axes": [0], "begin": [1], "end": [2]}) == {
        "axes": (0,),
        "begin": (1,),
        "end": (2,),
        "strides": None,
    }


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: op.make_call("astype", [X], {"dtype": "float16", "axis": 0}),
            "R.astype: expected attrs among (dtype), got unknown axis",
        ),
        (lambda: op.make_call("astype", [X], {}), "R.astype: expected attr dtype, got none"),
        (lambda: op.make_call("add", [X]), "R.add: expected 2 operands (x1, x2), got 1"),
        (
            lambda: op.make_call("add", [X, 1.0]),
            "R.add: expected x2 to be a Relax expression, got float",
        ),
        (
            lambda: op.make_call("add", [X, X], sinfo_args=[TensorStructInfo((4, 8), "float32")]),
            "R.add: expected no sinfo_args (the result is inferred), got 1",
        ),
        (lambda: op.make_call("no_such_op", [X]), "unknown op R.no_such_op"),
        (
            lambda: op.permute_dims(X, axes="ab"),
            "R.permute_dims: expected axes to be a list of ints, got 'ab'",
        ),
        (
            lambda: op.permute_dims(X, axes=[True, 0]),
            "R.permute_dims: expected axes to be an int, got True",
        ),
        (lambda: op.concat([X], axis=None), "R.concat: expected axis to be an int, got None"),
        (lambda: op.reshape(X, "32"), "R.reshape: expected shape to be a list of dims, got '32'"),
        (
            lambda: op.reshape(X, [4.0, 8]),
            "R.reshape: expected shape dims to be ints or prim expressions, got 4.0",
        ),
        (
            lambda: op.matmul(X, X, out_dtype=3),
            "R.matmul: expected out_dtype to be a dtype name, got 3",
        ),
    ],
)
def test_bad_calls_name_the_op_and_say_what_was_expected(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StructInfoError) as info:
        build()
    assert message in str(info.value)
