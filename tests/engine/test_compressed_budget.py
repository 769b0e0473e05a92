"""`--budget` holds for compressed sources: the plan counts the inflating buffers, and a
deflated npz member or torch storage is inflated in bounded chunks, only as far as the tensor
(or the block of rows) being read. Measured in a fresh process by its resident high-water mark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams
from lazyparams.engine import plan
from lazyparams.errors import BudgetError
from lazyparams.io import SafetensorsSource
from lazyparams.io.zip_members import INFLATE_BUFFER_BYTES
from tests.io.rawzip import STORED, entry, write_zip
from tests.io.torch_pickles import state_dict_pickle, tensor_opcodes

SLACK = 12 << 20
"""Resident memory a conversion may grow by beyond its budget: the interpreter's own
allocations, the sink's buffers and allocator rounding."""
ROOT = Path(lazyparams.__file__).resolve().parent.parent
CHILD = """
import json, resource, sys
from lazyparams.engine import convert
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
report = convert("cast:float16", sys.argv[1], sys.argv[2], budget=sys.argv[3], progress=False)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"growth": peak - start, "predicted": report.predicted_peak_bytes}))
"""


def converted_in_child(src: Path, dst: Path, budget: str) -> dict[str, int]:
    """Run the conversion in a new interpreter; its resident growth and predicted peak."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(dst), budget],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("save", [np.savez_compressed, np.savez], ids=["deflated", "stored"])
def test_an_npz_member_converts_within_the_budget(tmp_path: Path, save: Any) -> None:
    weights = np.tile(np.arange(4096, dtype=np.float32), (2048, 1))  # 32 MiB, deflates well
    src = tmp_path / "m.npz"
    save(src, w=weights)
    budget = 8 << 20
    result = converted_in_child(src, tmp_path / "out.safetensors", str(budget))
    assert result["predicted"] <= budget
    assert result["growth"] <= budget + SLACK, result
    with SafetensorsSource(tmp_path / "out.safetensors") as out:
        assert np.array_equal(out.load("w"), weights.astype(np.float16))


def test_a_tiny_tensor_of_a_deflated_storage_bomb_converts_within_the_budget(
    tmp_path: Path,
) -> None:
    numel = 16 << 20  # a 64 MiB storage of zeros, about 64 KiB deflated
    storage = bytearray(4 * numel)
    storage[-16:] = np.arange(4, dtype=np.float32).tobytes()
    record = tensor_opcodes("FloatStorage", "0", numel - 4, (4,), (1,), numel)
    members = [
        entry("archive/data.pkl", state_dict_pickle({"w": record}), STORED),
        entry("archive/data/0", bytes(storage), level=1),
    ]
    src = write_zip(tmp_path / "m.bin", members)
    budget = 1 << 20
    result = converted_in_child(src, tmp_path / "out.npz", str(budget))
    assert result["predicted"] <= budget
    assert result["growth"] <= budget + SLACK, result
    with np.load(tmp_path / "out.npz") as out:
        assert out["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_the_plan_counts_read_buffers_and_refuses_a_budget_below_them(tmp_path: Path) -> None:
    src = tmp_path / "m.npz"
    np.savez_compressed(src, w=np.zeros((64, 64), np.float32))
    counted = plan("cast:float16", src, budget="4MiB")
    assert counted.read_buffer_bytes == INFLATE_BUFFER_BYTES
    assert counted.predicted_peak_bytes == counted.profile.peak_bytes + INFLATE_BUFFER_BYTES
    stored = tmp_path / "s.npz"
    np.savez(stored, w=np.zeros((64, 64), np.float32))
    assert plan("cast:float16", stored, budget="4MiB").read_buffer_bytes == 0
    with pytest.raises(BudgetError, match=r"read buffers alone need 524288 bytes"):
        plan("cast:float16", src, budget="256KiB").check_budget()
