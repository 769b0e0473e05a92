"""Inference and bad input of the int8 and int4 quantize / dequantize ops."""

from __future__ import annotations

from lazyparams import op
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo, TupleStructInfo
from tests.op.helpers import raises, si, t

n, k = PrimVar("n"), PrimVar("k")


def pair(a: TensorStructInfo, b: TensorStructInfo) -> TupleStructInfo:
    return TupleStructInfo((a, b))


def test_quantize_int8_per_channel() -> None:
    assert si(op.quantize_int8(t((n, 64)))) == pair(
        TensorStructInfo((n, 64), "int8"), TensorStructInfo((n,), "float32")
    )
    assert si(op.quantize_int8(t((8, 64), "float16"), axis=-1)) == pair(
        TensorStructInfo((8, 64), "int8"), TensorStructInfo((64,), "float32")
    )
    assert si(op.quantize_int8(t(None, ndim=3))) == pair(
        TensorStructInfo(None, "int8", 3), TensorStructInfo(None, "float32", 1)
    )
    assert si(op.quantize_int8(t(None))) == pair(
        TensorStructInfo(None, "int8"), TensorStructInfo(None, "float32", 1)
    )


def test_dequantize_int8_inverts_the_types() -> None:
    q, s = t((n, 64), "int8"), t((n,))
    assert si(op.dequantize_int8(q, s)) == TensorStructInfo((n, 64), "float32")
    assert si(op.dequantize_int8(t((8, 64), "int8"), t((64,)), axis=1)) == TensorStructInfo(
        (8, 64), "float32"
    )
    assert si(op.dequantize_int8(t(None, "int8"), t(None))) == TensorStructInfo(None, "float32")


def test_int8_bad_input() -> None:
    with raises(r"R.quantize_int8: expected x of a float dtype, got int32"):
        op.quantize_int8(t((2, 2), "int32"))
    with raises(r"R.quantize_int8: expected axis in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.quantize_int8(t((2, 2)), axis=2)
    with raises(r"R.dequantize_int8: expected q of dtype int8, got uint8"):
        op.dequantize_int8(t((2, 2), "uint8"), t((2,)))
    with raises(r"R.dequantize_int8: expected scale of dtype float32, got float16"):
        op.dequantize_int8(t((2, 2), "int8"), t((2,), "float16"))
    with raises(r"R.dequantize_int8: expected scale of rank 1, got .* of rank 2"):
        op.dequantize_int8(t((2, 2), "int8"), t((2, 1)))
    with raises(r"R.dequantize_int8: expected 3 scales \(q's dim on axis 0\), got 2"):
        op.dequantize_int8(t((3, 2), "int8"), t((2,)))


def test_quantize_int4_packs_two_a_byte() -> None:
    assert si(op.quantize_int4(t((16, 128)))) == pair(
        TensorStructInfo((16, 64), "uint8"), TensorStructInfo((16, 4), "float32")
    )
    assert si(op.quantize_int4(t((n, 64)), group_size=16)) == pair(
        TensorStructInfo((n, 32), "uint8"), TensorStructInfo((n, 4), "float32")
    )
    assert si(op.quantize_int4(t((n, k * 64)))) == pair(
        TensorStructInfo((n, k * 32), "uint8"), TensorStructInfo((n, k * 2), "float32")
    )
    assert si(op.quantize_int4(t(None, ndim=2))) == pair(
        TensorStructInfo(None, "uint8", 2), TensorStructInfo(None, "float32", 2)
    )


def test_dequantize_int4_unpacks() -> None:
    packed, scale = t((n, 64), "uint8"), t((n, 4))
    assert si(op.dequantize_int4(packed, scale)) == TensorStructInfo((n, 128), "float32")
    symbolic = op.dequantize_int4(t((n, k * 16), "uint8"), t((n, k)))
    assert si(symbolic) == TensorStructInfo((n, k * 32), "float32")
    assert si(op.dequantize_int4(t(None, "uint8", 2), scale)) == TensorStructInfo(
        None, "float32", 2
    )


def test_int4_bad_input() -> None:
    with raises(r"R.quantize_int4: expected K divisible by group_size 32, got K = 48"):
        op.quantize_int4(t((4, 48)))
    with raises(r"R.quantize_int4: expected an even K \(two int4 values a byte\), got K = 9"):
        op.quantize_int4(t((4, 9)), group_size=3)
    with raises(r"R.quantize_int4: expected x of rank 2, got R.Tensor\(\(2, 2, 32\), .* rank 3"):
        op.quantize_int4(t((2, 2, 32)))
    with raises(r"R.quantize_int4: expected a positive group_size, got 0"):
        op.quantize_int4(t((2, 32)), group_size=0)
    with raises(r"R.quantize_int4: expected x of a float dtype, got int8"):
        op.quantize_int4(t((2, 32), "int8"))
    with raises(r"R.dequantize_int4: expected packed of dtype uint8, got int8"):
        op.dequantize_int4(t((2, 16), "int8"), t((2, 1)))
    with raises(r"R.dequantize_int4: expected K divisible by group_size 32, got K = 20"):
        op.dequantize_int4(t((2, 10), "uint8"), t((2, 1)))
    with raises(r"R.dequantize_int4: expected scale of shape \(2, 2\) .*groups.*, got 3 groups"):
        op.dequantize_int4(t((2, 32), "uint8"), t((2, 3)))
    with raises(r"R.dequantize_int4: expected scale of shape \(2, 1\) .*rows.*, got 3 rows"):
        op.dequantize_int4(t((2, 16), "uint8"), t((3, 1)))
    with raises(r"R.dequantize_int4: expected scale of rank 2, got .* of rank 1"):
        op.dequantize_int4(t((2, 16), "uint8"), t((2,)))
