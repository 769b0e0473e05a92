"""The io layer's dtype table (io may not import the IR) agrees with the IR's, name by name."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.errors import CheckpointError
from lazyparams.io.dtypes import DTYPE_NAMES, dtype_name, itemsize, numpy_dtype
from lazyparams.ir import dtype as ir_dtype


def test_both_tables_name_the_same_dtypes() -> None:
    assert sorted((*DTYPE_NAMES, *BLOCK_TYPES)) == sorted(ir_dtype.DTYPES)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_each_dtype_has_the_same_numpy_type_and_width(name: str) -> None:
    assert numpy_dtype(name) == ir_dtype.to_numpy(name)
    assert itemsize(name) == ir_dtype.itemsize(name)
    assert dtype_name(numpy_dtype(name)) == ir_dtype.from_numpy(numpy_dtype(name)) == name


def test_byte_swapped_arrays_keep_their_name_and_unknown_names_are_refused() -> None:
    assert dtype_name(np.dtype(">f4")) == "float32"
    assert dtype_name(np.dtype(np.complex64)) is None
    with pytest.raises(CheckpointError, match="unknown dtype 'float128'; expected one of"):
        numpy_dtype("float128")
