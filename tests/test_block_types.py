"""The block-type table agrees with gguf-py's: ids, names, block sizes and bytes per block;
and every type gguf-py dequantizes is in it."""

from __future__ import annotations

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import _type_traits

from lazyparams.block_types import BLOCK_TYPES, BY_GGML_ID, QUANTIZABLE


def test_every_row_matches_gguf_py() -> None:
    for name, block in BLOCK_TYPES.items():
        ggml = GGMLQuantizationType(block.ggml_id)
        assert ggml.name.lower() == name
        assert GGML_QUANT_SIZES[ggml] == (block.block_size, block.type_size)
        assert BY_GGML_ID[block.ggml_id] is block


def test_every_block_type_gguf_py_reads_is_listed() -> None:
    readable = {t.name.lower() for t in GGML_QUANT_SIZES if t in _type_traits}
    assert readable - {"bf16"} == set(BLOCK_TYPES)
    assert set(BLOCK_TYPES) >= QUANTIZABLE


def test_shapes_convert_both_ways() -> None:
    q4k = BLOCK_TYPES["q4_k"]
    assert q4k.storage_shape((3, 512)) == (3, 288)
    assert q4k.logical_shape((3, 288)) == (3, 512)
    assert q4k.row_bytes(256) == 144
