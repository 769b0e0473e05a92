"""DictSource and DictSink, the in-memory checkpoint, plus the dtype name table."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from lazyparams.errors import CheckpointError
from lazyparams.io import DTYPE_NAMES, DictSink, DictSource, TensorInfo, dtype_name, numpy_dtype


def test_dict_sink_keeps_the_written_arrays_without_copying() -> None:
    w, b = np.ones((2, 2), np.float32), np.zeros(2, ml_dtypes.bfloat16)
    sink = DictSink([TensorInfo.from_array("w", w), TensorInfo.from_array("b", b)])
    with sink:
        sink.write("b", b)
        sink.write("w", w)
    assert list(sink.tensors) == ["w", "b"]
    assert sink.tensors["w"] is w


def test_dict_sink_abort_forgets_everything() -> None:
    sink = DictSink([TensorInfo.of("w", (1,), "int8")])
    sink.write("w", np.ones(1, np.int8))
    sink.abort()
    assert sink.tensors == {}


def test_dict_source_lists_and_loads_read_only_views() -> None:
    w = np.arange(3, dtype=np.int64)
    with DictSource({"w": w, "s": np.float16(2)}) as source:
        assert source.names() == ["w", "s"]
        assert source.info("s") == TensorInfo("s", (), "float16", 2)
        got = source.load("w")
        assert not got.flags.writeable and np.shares_memory(got, w)
        with pytest.raises(CheckpointError, match="<memory>: no tensor named 'x'"):
            source.info("x")


def test_dict_source_refuses_arrays_without_a_dtype_name() -> None:
    with pytest.raises(CheckpointError, match="tensor 'c': unsupported numpy dtype complex64"):
        DictSource({"c": np.zeros(2, np.complex64)})


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_names_round_trip(name: str) -> None:
    assert dtype_name(numpy_dtype(name)) == name


def test_dtype_table_details() -> None:
    assert dtype_name(np.dtype(">f4")) == "float32"
    assert dtype_name(np.dtype("V2")) is None
    assert numpy_dtype("int4").itemsize == 1
    assert TensorInfo.of("q", (3, 5), "int4").nbytes == 15
    with pytest.raises(CheckpointError, match="unknown dtype 'float128'"):
        numpy_dtype("float128")
