"""Smoke test of the kernel benchmark: every case runs, its old and new kernels agree bit for
bit, and a table row comes out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from benchmarks import bench_kernels
from lazyparams.runtime import run_kernel


def _bits(value: Any) -> list[np.ndarray]:
    values = value if isinstance(value, tuple) else (value,)
    return [np.ascontiguousarray(v).view(np.uint8) for v in values]


@pytest.mark.parametrize("group", sorted(bench_kernels.GROUPS))
def test_every_case_runs_and_old_equals_new(group: str) -> None:
    for case in bench_kernels.GROUPS[group](1):
        new = run_kernel(case.op, case.inputs, case.attrs)
        for got, want in zip(_bits(new), _bits(case.old()), strict=True):
            np.testing.assert_array_equal(got, want, err_msg=case.name)
        row = bench_kernels._row(case, bench_kernels.measure(case, repeat=1))
        assert row.startswith(f"| {case.name} |") and row.count("|") == 12
