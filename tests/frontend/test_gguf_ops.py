"""Tracing GGML block quantization: `ops.quantize_gguf`, `ops.dequantize_gguf`, and `astype`
to and from block types; the traced modules print, parse back and run."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import TraceError
from lazyparams.frontend import ops, trace
from lazyparams.ir import IRModule, assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.runtime.gguf_quants import DEQUANTIZE, QUANTIZE
from lazyparams.script import parse


def _traced(fn: object, shape: tuple[int, ...] = (4, 64), dtype: str = "float32") -> IRModule:
    return trace(fn, {"w": (shape, dtype)})  # type: ignore[arg-type]


def _run(mod: IRModule, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    result = VirtualMachine(mod)["transform_params"](tuple(inputs))
    return tuple(result)


def test_quantize_and_astype_give_block_tensors() -> None:
    seen = {}

    def spec(p: dict[str, object]) -> dict[str, object]:
        q = ops.quantize_gguf(p["w"], "q8_0")  # type: ignore[arg-type]
        seen["q"] = (q.shape, q.dtype, q.nbytes)
        return {"a": q, "b": p["w"].astype("q4_1"), "c": q.astype("float16")}  # type: ignore[attr-defined]

    mod = _traced(spec)
    assert seen["q"] == ((4, 64), "q8_0", 4 * 2 * 34)
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    a, b, c = _run(mod, x)
    assert np.array_equal(a, QUANTIZE["q8_0"](x)) and np.array_equal(b, QUANTIZE["q4_1"](x))
    assert np.array_equal(c, DEQUANTIZE["q8_0"](a, 64).astype(np.float16))


def test_block_to_block_and_to_int_go_through_float32() -> None:
    mod = trace(
        lambda p: {"q4": p["w"].astype("q4_0"), "i": p["w"].astype("int32")},
        {"w": ((2, 64), "q8_0")},
    )
    text = mod.script()
    assert (
        text.count("R.dequantize_gguf(") == 2
        and 'R.astype(dequantize_gguf_1, dtype="int32")' in text
    )
    q8 = QUANTIZE["q8_0"](np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32))
    q4, ints = _run(mod, q8)
    values = DEQUANTIZE["q8_0"](q8, 64)
    assert np.array_equal(q4, QUANTIZE["q4_0"](values))
    assert np.array_equal(ints, values.astype(np.int32))


def test_modules_with_block_ops_print_and_parse_back() -> None:
    mod = _traced(
        lambda p: {"q": ops.dequantize_gguf(ops.quantize_gguf(p["w"], "q5_0"), "bfloat16")}
    )
    text = mod.script()
    assert 'R.quantize_gguf(w, type="q5_0")' in text and 'dtype="q5_0"' in text
    assert_structural_equal(parse(text), mod, map_free_vars=True)
    positional = text.replace('R.quantize_gguf(w, type="q5_0")', 'R.quantize_gguf(w, "q5_0")')
    assert_structural_equal(parse(positional), mod, map_free_vars=True)


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            lambda p: ops.quantize_gguf(p["w"], "q8_0"),
            "multiple of q8_0's block of 32 values, got 48",
        ),
        (lambda p: p["w"].astype("iq1_s"), "iq1_s can be read but not written"),
        (lambda p: ops.dequantize_gguf(p["w"]), "expected a GGML block type"),
    ],
)
def test_bad_block_ops_are_located_errors(fn: object, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        _traced(lambda p: {"o": fn(p)}, shape=(4, 48))  # type: ignore[operator]
