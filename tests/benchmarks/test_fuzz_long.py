"""Smoke test of the long fuzz run: one short round writes its table and reproducers, and a
reproducer replays in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import fuzz_long
from tests.fuzz.campaign import Finding, write_reproducer
from tests.fuzz.cases import Case


def test_a_short_round_prints_counts_and_writes_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "findings.md"
    argv = ["fuzz_long", "--seeds", "1", "--cases", "3", "--formats", "npy,gguf"]
    argv += ["--findings", str(tmp_path / "repro"), "--markdown", str(table)]
    monkeypatch.setattr(sys, "argv", argv)
    fuzz_long.main()
    out = capsys.readouterr().out
    assert "seed 1, cases 0 to 3 of each format" in out
    assert "TOTAL (cases of each format per seed: 1: 3)" in out
    assert "npy" in out and "gguf" in out
    assert "| format | cases | outcomes | slowest case |" in table.read_text()


def test_a_reproducer_replays_and_is_rechecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = Case(
        1, 2, "npz", "sink0", ("m.npz: truncate to 4",), {"m.npz": b"PK\x03\x04"}, "m.npz", None
    )
    finding = Finding("npz", "error", "E", "E: x", "f", case, "tb")
    fuzz_long.replay(write_reproducer(tmp_path, finding, 0))
    out = capsys.readouterr()
    assert "npz case 1:2: m.npz: truncate to 4" in out.out
    assert "CheckpointError" in out.err or "ok:" in out.out
    argv = ["--recheck", str(tmp_path), "--workers", "1", "--markdown", str(tmp_path / "now.md")]
    fuzz_long.print_recheck(tmp_path, fuzz_long._arguments(argv))
    row = (tmp_path / "now.md").read_text().splitlines()[2]
    assert row.startswith("| 000-npz-error-E-f | npz | error E | refused |"), row
