"""Smoke test of the workers benchmark on a small checkpoint: a row per tree and worker count,
each with its time split, and no output left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks import bench_workers
from tests.engine.helpers import small_llama

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/schedstat"), reason="needs Linux's scheduler statistics"
)


def test_each_worker_count_gets_a_row_with_its_time_split(tmp_path: Path) -> None:
    model = small_llama(tmp_path / "model")
    scratch = tmp_path / "scratch"
    argv = ["--model", str(model), "--scratch", str(scratch), "--recipe", "cast:float16"]
    text = bench_workers.main([*argv, "--repeat", "1", "--workers", "1,2"])
    rows = [line.split(" | ") for line in text.splitlines()[4:]]
    assert [(row[0], row[1]) for row in rows] == [("| this", "1"), ("| this", "2")]
    assert rows[0][3] == "1.00 (1.00-1.00)"
    assert all(float(row[2]) > 0 and float(row[4]) > 0 for row in rows)  # wall, on CPU
    assert list(scratch.iterdir()) == []


def test_a_failing_conversion_stops_the_benchmark(tmp_path: Path) -> None:
    argv = ["--model", str(tmp_path / "missing"), "--scratch", str(tmp_path / "scratch")]
    with pytest.raises(SystemExit, match=r"with 1 worker\(s\): exit 1"):
        bench_workers.main([*argv, "--repeat", "1", "--workers", "1"])
