"""Smoke test of the copy-limit benchmark on a small checkpoint: every contender gets a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_copy_limit
from tests.engine.helpers import small_llama


def test_the_copy_and_each_conversion_get_a_row_with_ratios(tmp_path: Path) -> None:
    model = small_llama(tmp_path / "model")
    scratch = tmp_path / "scratch"
    argv = ["--model", str(model), "--scratch", str(scratch), "--repeat", "1"]
    text = bench_copy_limit.main([*argv, "--workers", "1", "--recipes", "cast:float16"])
    rows = text.splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == ["| cat + sync", "| cast:float16, 1 worker"]
    assert rows[0].split(" | ")[3] == "1.00" and rows[1].split(" | ")[4] == "1.00"
    assert list(scratch.iterdir()) == []  # every output deleted


def test_a_scratch_folder_with_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit, match="expected an empty folder"):
        bench_copy_limit.main(["--model", str(tmp_path), "--scratch", str(tmp_path)])
    assert (tmp_path / "keep.txt").read_text() == "mine"
