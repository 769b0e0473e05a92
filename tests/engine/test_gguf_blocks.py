"""Conversions with GGML block types: to a Q8_0 GGUF and back to safetensors, in bounded
memory (row blocks under a budget give the very same bytes), with the oracle's bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.engine import convert, plan
from lazyparams.errors import CheckpointError
from lazyparams.frontend import ops
from lazyparams.io import open_source
from lazyparams.runtime.gguf_quants import DEQUANTIZE, QUANTIZE
from tests.engine.helpers import read_all, small_llama


def q8_0_spec(params: Any) -> dict[str, Any]:
    return {n: ops.quantize_gguf(t, "q8_0") if t.ndim == 2 else t for n, t in params.items()}


@pytest.fixture(scope="module", name="converted")
def converted_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("q8")
    src = small_llama(folder / "src")
    convert(q8_0_spec, src, folder / "q8.gguf", progress=False)
    return src, folder / "q8.gguf"


def test_q8_0_gguf_holds_the_reference_bytes(converted: tuple[Path, Path]) -> None:
    src, gguf_path = converted
    original, written = read_all(src), read_all(gguf_path)
    with open_source(gguf_path) as source:
        for name, x in original.items():
            info = source.info(name)
            assert info.shape == x.shape
            if x.ndim == 2:
                assert info.dtype == "q8_0"
                assert np.array_equal(written[name], QUANTIZE["q8_0"](x))
            else:
                assert np.array_equal(written[name], x)


def test_q8_0_gguf_back_to_safetensors_with_cast(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    _, gguf_path = converted
    report = convert("cast:float32", gguf_path, tmp_path / "back.safetensors", progress=False)
    assert report.measured_peak_bytes == report.predicted_peak_bytes
    blocks, back = read_all(gguf_path), read_all(tmp_path / "back.safetensors")
    for name, values in back.items():
        assert values.dtype == np.float32
        if blocks[name].dtype == np.uint8:
            assert np.array_equal(values, DEQUANTIZE["q8_0"](blocks[name], values.shape[1]))


def test_a_spec_touching_only_float_tensors_reads_only_them(converted: tuple[Path, Path]) -> None:
    _, gguf_path = converted
    touched = plan(lambda p: {"norm": p["model.norm.weight"] * 2}, gguf_path)
    assert [info.name for info in touched.inputs] == ["model.norm.weight"]


def test_under_a_budget_block_rows_give_the_same_bytes(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    src, gguf_path = converted
    whole = plan(q8_0_spec, src)
    budget = whole.predicted_peak_bytes * 3 // 4
    report = convert(q8_0_spec, src, tmp_path / "rows.gguf", budget=budget, progress=False)
    assert report.measured_peak_bytes == report.predicted_peak_bytes <= budget
    assert (tmp_path / "rows.gguf").read_bytes() == gguf_path.read_bytes()
    back = convert(
        "cast:float32", gguf_path, tmp_path / "a.safetensors", budget=budget, progress=False
    )
    assert back.measured_peak_bytes == back.predicted_peak_bytes <= budget


def test_int4_recipe_to_gguf_is_refused_before_writing(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    src, _ = converted
    with pytest.raises(
        CheckpointError, match=r"GGUF has no type for uint8; expected one of .*q8_0"
    ):
        convert("quantize-int4", src, tmp_path / "int4.gguf", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_int8_recipe_to_gguf_writes_gguf_types(
    converted: tuple[Path, Path], tmp_path: Path
) -> None:
    src, _ = converted
    convert("quantize-int8", src, tmp_path / "int8.gguf", progress=False)
    with open_source(tmp_path / "int8.gguf") as source:
        dtypes = {source.info(name).dtype for name in source.names()}
    assert dtypes == {"int8", "float32"}
