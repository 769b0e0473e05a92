"""take_along_axis: inference, the numpy kernel against numpy, the traced function, and the
chunker's rule (a gather by constant indices runs in blocks of rows, bit for bit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lazyparams
from lazyparams import op
from lazyparams.errors import RuntimeExecError, TraceError
from lazyparams.frontend import ops
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.runtime import run_kernel
from tests.op.helpers import raises, si, t


def test_the_axis_takes_the_indices_extent_and_the_others_broadcast() -> None:
    rows = t((5, 1), "int16")
    assert si(op.take_along_axis(t((3, 4)), rows, axis=0)) == TensorStructInfo((5, 4), "float32")
    cols = t((1, 7), "int32")
    assert si(op.take_along_axis(t((3, 4)), cols, axis=-1)) == TensorStructInfo((3, 7), "float32")
    assert si(op.take_along_axis(t((1, 4)), t((2, 6), "int8"), axis=1)) == TensorStructInfo(
        (2, 6), "float32"
    )


def test_bad_indices_are_refused() -> None:
    with raises("integer dtype"):
        op.take_along_axis(t((3, 4)), t((3, 1)), axis=0)
    with raises("rank 2"):
        op.take_along_axis(t((3, 4)), t((3,), "int32"), axis=0)
    with raises("broadcast"):
        op.take_along_axis(t((3, 4)), t((2, 3), "int32"), axis=0)


def test_kernel_is_numpy_take_along_axis() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    index = (np.arange(7) // 3).reshape(1, 7).astype(np.int16)
    got = run_kernel("take_along_axis", (x, index), {"axis": 1})
    np.testing.assert_array_equal(got, np.take_along_axis(x, index, axis=1))
    with pytest.raises(RuntimeExecError, match="integer indices"):
        run_kernel("take_along_axis", (x, index.astype(np.float32)), {"axis": 1})
    with pytest.raises(RuntimeExecError, match="take_along_axis"):
        run_kernel("take_along_axis", (x, index + 5), {"axis": 1})


def _expand(p: dict[str, lazyparams.frontend.Tensor]) -> dict[str, lazyparams.frontend.Tensor]:
    """w times s expanded per block of 2 rows and 3 columns (the last blocks cut short)."""
    rows = (np.arange(5) // 2).reshape(5, 1).astype(np.int16)
    cols = (np.arange(7) // 3).reshape(1, 7).astype(np.int16)
    scale = ops.take_along_axis(ops.take_along_axis(p["s"], rows, 0), cols, 1)
    return {"y": p["w"] * scale}


def test_traced_gather_runs_in_blocks_of_rows_bit_for_bit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = {
        "w": rng.standard_normal((5, 7)).astype(np.float32),
        "s": rng.standard_normal((3, 3)).astype(np.float32),
    }
    np.savez(tmp_path / "x.npz", **data)
    want = data["w"] * np.repeat(np.repeat(data["s"], 2, 0), 3, 1)[:5, :7]
    whole = lazyparams.convert(_expand, tmp_path / "x.npz", {}, progress=False)
    blocks: dict[str, np.ndarray] = {}
    chunked = lazyparams.convert(_expand, tmp_path / "x.npz", blocks, budget=150, progress=False)
    assert chunked.plan.predicted_peak_bytes < whole.plan.predicted_peak_bytes
    assert chunked.plan.predicted_peak_bytes <= 150
    np.testing.assert_array_equal(blocks["y"], want)


def test_the_frontend_refuses_float_indices() -> None:
    def bad(p: dict[str, lazyparams.frontend.Tensor]) -> dict[str, lazyparams.frontend.Tensor]:
        return {"y": ops.take_along_axis(p["w"], np.zeros((1, 2), np.float32), 1)}

    with pytest.raises(TraceError, match="integer dtype"):
        lazyparams.trace(bad, {"w": ((2, 2), "float32")})
