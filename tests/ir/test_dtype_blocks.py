"""Block types among the IR's dtypes: names, exact sizes, storage shapes, clear refusals."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import StructInfoError
from lazyparams.ir import dtype
from lazyparams.ir.struct_info import TensorStructInfo


def test_block_types_are_dtypes_held_as_bytes() -> None:
    assert dtype.is_dtype("q8_0") and dtype.is_block("q6_k") and not dtype.is_block("uint8")
    assert dtype.canonical_dtype("iq4_xs") == "iq4_xs"
    assert dtype.to_numpy("q4_0") == np.uint8
    assert not dtype.is_float("q8_0") and not dtype.is_int("iq2_xs")
    assert TensorStructInfo((4, 64), "q8_0").dtype == "q8_0"


def test_sizes_are_exact() -> None:
    assert dtype.nbytes("q8_0", (4, 64)) == 4 * 2 * 34
    assert dtype.nbytes("q6_k", (2, 3, 256)) == 6 * 210
    assert dtype.nbytes("float16", (4, 64)) == 512
    assert dtype.storage_shape("q5_0", (4, 64)) == (4, 44)
    assert dtype.storage_shape("float32", (4, 64)) == (4, 64)


def test_per_element_widths_are_refused_for_block_types() -> None:
    with pytest.raises(StructInfoError, match="block type q8_0 has no per-element width"):
        dtype.bits("q8_0")
    with pytest.raises(StructInfoError, match="'float32' is not a block type"):
        dtype.block_type("float32")
