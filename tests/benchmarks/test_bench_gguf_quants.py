"""Smoke test of the block-kernel benchmark: every registered kernel gets a table row."""

from __future__ import annotations

from benchmarks import bench_gguf_quants
from lazyparams.runtime.gguf_quants import QUANTIZE


def test_every_registered_quantizer_and_its_dequantizer_has_a_row() -> None:
    rows = bench_gguf_quants.run(mib=0.05, repeat=1, dequantize_all=False)
    ops = [row["op"] for row in rows]
    assert ops == [f"quantize {t}" for t in QUANTIZE] + [f"dequantize {t}" for t in QUANTIZE]
    text = bench_gguf_quants.table(rows)
    assert text.count("\n") == len(rows) + 1 and "| quantize q8_0 |" in text
