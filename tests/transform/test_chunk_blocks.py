"""Row-block chains through GGML block ops: split along any axis but the last (a row's values
share blocks), so a 2-D quantization runs in row blocks and a 1-D one stays whole."""

from __future__ import annotations

from lazyparams.frontend import ops, trace
from lazyparams.ir import IRModule
from lazyparams.transform import standard_pipeline
from lazyparams.transform.chunk_chains import find_chains

FUNC = "transform_params"


def _lazy(shape: tuple[int, ...], dtype: str, fn: object) -> IRModule:
    traced = trace(lambda p: {"o": fn(p["w"])}, {"w": (shape, dtype)})  # type: ignore[operator]
    return standard_pipeline(func_names=[FUNC])(traced)


def _axes(mod: IRModule) -> list[int]:
    return [chain.axis for chain in find_chains(mod[FUNC])]  # type: ignore[arg-type]


def test_quantize_and_dequantize_chains_split_along_rows() -> None:
    assert _axes(_lazy((64, 64), "float32", lambda w: ops.quantize_gguf(w, "q8_0"))) == [0]
    assert _axes(_lazy((64, 64), "q4_0", lambda w: w.astype("float16"))) == [0]
    transposed = _lazy((64, 64), "float32", lambda w: ops.quantize_gguf(w.T, "q8_0"))
    assert _axes(transposed) == [1]  # the input's columns become the blocks' rows


def test_a_single_row_of_blocks_is_not_split() -> None:
    assert _axes(_lazy((256,), "float32", lambda w: ops.quantize_gguf(w, "q8_0"))) == []
    assert _axes(_lazy((256,), "q8_0", lambda w: w.astype("float32"))) == []


def test_block_rows_are_not_split_along_their_columns() -> None:
    # the output's rows are the input's columns, which share blocks: no block of rows fits
    transposed = _lazy((64, 64), "q8_0", lambda w: w.astype("float32").T)
    assert _axes(transposed) == []
    assert _axes(_lazy((64, 64), "q8_0", lambda w: w.astype("float32") * 2)) == [0]
