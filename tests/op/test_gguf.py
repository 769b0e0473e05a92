"""Inference and bad input of the GGML block ops `quantize_gguf` and `dequantize_gguf`."""

from __future__ import annotations

import pytest

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from tests.op.helpers import raises, si, t

n = PrimVar("n")


def test_quantize_keeps_the_logical_shape_in_the_block_dtype() -> None:
    assert si(op.quantize_gguf(t((n, 64)), "q8_0")) == TensorStructInfo((n, 64), "q8_0")
    assert si(op.quantize_gguf(t((2, 3, 256), "bfloat16"), "q4_k")) == TensorStructInfo(
        (2, 3, 256), "q4_k"
    )
    assert si(op.quantize_gguf(t(None, ndim=2), "q4_0")) == TensorStructInfo(None, "q4_0", 2)


def test_dequantize_gives_floats_of_the_same_shape() -> None:
    q = t((n, 64), "q5_1")
    assert si(op.dequantize_gguf(q, "q5_1")) == TensorStructInfo((n, 64), "float32")
    assert si(op.dequantize_gguf(q, "q5_1", "float16")) == TensorStructInfo((n, 64), "float16")
    assert si(op.dequantize_gguf(t((4, 256), "iq2_xs"), "iq2_xs")) == TensorStructInfo(
        (4, 256), "float32"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: op.quantize_gguf(t((4, 48)), "q8_0"),
            "multiple of q8_0's block of 32 values, got 48",
        ),
        (lambda: op.quantize_gguf(t((4, 128)), "q4_k"), "q4_k's block of 256 values, got 128"),
        (
            lambda: op.quantize_gguf(t((4, 64), "int8"), "q8_0"),
            "expected x of a float dtype, got int8",
        ),
        (lambda: op.quantize_gguf(t(()), "q8_0"), "got a 0-d tensor"),
        (lambda: op.quantize_gguf(t((4, 256)), "iq2_xs"), "iq2_xs can be read but not written"),
        (lambda: op.quantize_gguf(t((4, 64)), "q9_9"), "expected type to be a GGML block type"),
        (lambda: op.quantize_gguf(t((4, 64), "q8_0"), "q4_0"), "got block type q8_0"),
        (
            lambda: op.dequantize_gguf(t((4, 64)), "q8_0"),
            "expected q of block type q8_0, got float32",
        ),
        (lambda: op.dequantize_gguf(t((4, 64), "q8_0"), "q4_0"), "expected q of block type q4_0"),
        (lambda: op.dequantize_gguf(t((4, 64), "q8_0"), "q8_0", "int8"), "one of float32, float16"),
    ],
)
def test_bad_calls_are_refused(make: object, message: str) -> None:
    with raises(message):
        make()  # type: ignore[operator]


def test_other_ops_refuse_block_operands() -> None:
    q = t((4, 64), "q8_0")
    with raises("R.add: expected x1 of an element dtype, got block type q8_0"):
        op.add(q, q)
    with raises("R.permute_dims: expected x of an element dtype, got block type q8_0"):
        op.permute_dims(q)
    with raises("R.astype: expected an element dtype, got block type q4_0"):
        op.astype(t((4, 64)), "q4_0")
