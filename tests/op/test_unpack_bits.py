"""unpack_bits: inference, the kernel against packing done independently, the printed form
parsed back, and the chunker's rule (rows split along any axis but the unpacked one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lazyparams
from lazyparams import op
from lazyparams.errors import RuntimeExecError
from lazyparams.frontend import ops
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.runtime import run_kernel
from lazyparams.script import parse
from tests.op.helpers import raises, si, t


def packed(fields: np.ndarray, bits: int) -> np.ndarray:
    """Fields packed into int32 words along axis 0, field k of a word at bits * k, written
    with Python ints (no numpy bit tricks)."""
    per = 32 // bits
    rows, cols = fields.shape[0] // per, fields.shape[1]
    words = np.zeros((rows, cols), np.int64)
    for r in range(rows):
        for c in range(cols):
            word = sum(int(fields[r * per + k, c]) << (bits * k) for k in range(per))
            words[r, c] = word - (1 << 32) if word >= 1 << 31 else word
    return words.astype(np.int32)


def test_the_unpacked_axis_grows_by_the_fields_a_word_holds() -> None:
    x = t((3, 5), "int32")
    assert si(op.unpack_bits(x, 4, axis=0)) == TensorStructInfo((24, 5), "int8")
    assert si(op.unpack_bits(x, 2, axis=1, dtype="int16")) == TensorStructInfo((3, 80), "int16")
    assert si(op.unpack_bits(x, 8)) == TensorStructInfo((3, 20), "int8")


def test_bad_operands_are_refused() -> None:
    with raises("int32"):
        op.unpack_bits(t((3, 5), "int8"), 4)
    with raises("bits in"):
        op.unpack_bits(t((3, 5), "int32"), 3)
    with raises("dtype in"):
        op.unpack_bits(t((3, 5), "int32"), 4, dtype="float32")


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_kernel_reads_every_field_lowest_first(bits: int) -> None:
    fields = np.random.default_rng(bits).integers(0, 1 << bits, (32 // bits * 3, 4))
    words = packed(fields, bits)
    dtype = "int16" if bits == 8 else "int8"
    got = run_kernel("unpack_bits", (words,), {"bits": bits, "axis": 0, "dtype": dtype})
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, fields)
    across = run_kernel("unpack_bits", (words.T.copy(),), {"bits": bits, "axis": 1, "dtype": dtype})
    np.testing.assert_array_equal(across, fields.T)
    with pytest.raises(RuntimeExecError, match="int32"):
        run_kernel(
            "unpack_bits", (words.astype(np.int64),), {"bits": bits, "axis": 0, "dtype": dtype}
        )


def _unpack(p: dict[str, lazyparams.frontend.Tensor]) -> dict[str, lazyparams.frontend.Tensor]:
    return {"y": ops.unpack_bits(p["w"], 4, axis=1).astype("float32")}


def test_traced_unpacking_prints_parses_and_runs_in_blocks_of_rows(tmp_path: Path) -> None:
    words = packed(np.random.default_rng(0).integers(0, 16, (64, 40)), 4).T.copy()  # [40, 8]
    np.savez(tmp_path / "w.npz", w=words)
    traced = lazyparams.trace(_unpack, {"w": ((40, 8), "int32")})
    assert parse(traced.script()).script() == traced.script()
    whole = lazyparams.convert(_unpack, tmp_path / "w.npz", {}, progress=False)
    blocks: dict[str, np.ndarray] = {}
    budget = whole.plan.predicted_peak_bytes // 4
    chunked = lazyparams.convert(_unpack, tmp_path / "w.npz", blocks, budget=budget, progress=False)
    assert chunked.plan.predicted_peak_bytes <= budget
    want = run_kernel("unpack_bits", (words,), {"bits": 4, "axis": 1, "dtype": "int8"})
    np.testing.assert_array_equal(blocks["y"], want.astype(np.float32))
