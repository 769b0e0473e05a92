"""The start-up benchmark's side-by-side mode: runs alternate between checkouts, one table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks import bench_startup


def test_runs_alternate_between_the_checkouts(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []

    def fake_run(argv: Sequence[str], root: Path) -> tuple[float, float]:
        order.append(root.name)
        return (2.0, 1.0) if root.name == "old" else (1.0, 0.5)

    monkeypatch.setattr(bench_startup, "run_once", fake_run)
    found = bench_startup.medians_side_by_side(["x"], 3, [Path("old"), Path("new")], True)
    assert order == ["old", "new"] * 4  # the warm-up, then three alternating rounds
    assert found == [(2.0, 1.0), (1.0, 0.5)]
    assert bench_startup.medians(["x"], 2, Path("new"), warm_up=False) == (1.0, 0.5)


def test_the_table_sets_before_and_after_side_by_side() -> None:
    rows = [("floor", (0.4, 0.1), (0.4, 0.1)), ("plan", (4.0, 2.0), (1.0, 0.5))]
    text = bench_startup.side_by_side_table(rows, 5, 1)
    assert "| plan | 2.000 | 0.500 | 0.25 | 4.000 | 1.000 | 5.00 |" in text
    assert text.count("\n|") == 4  # header, rule and one line per row
