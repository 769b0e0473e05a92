"""Every fuzz finding's reproducer, replayed: each now ends in success or a clean refusal.

`tests/fuzz/reproducers/<name>/` holds one finding as benchmarks/fuzz_long.py wrote it: the
case's files under `files/` and `case.json` (format, campaign seed and case number, mutations,
and how it ended when it was found). Its reader was fixed; the folder stays so the fault
cannot come back unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lazyparams.errors import CheckpointError
from tests.fuzz.campaign import read_reproducer
from tests.fuzz.worker import OBJECT_REPR, exercise

FOLDER = Path(__file__).parent / "reproducers"
REPRODUCERS = sorted(path.parent for path in FOLDER.glob("*/case.json"))


def test_every_finding_has_a_reproducer_here() -> None:
    assert REPRODUCERS, f"no reproducers under {FOLDER}"


@pytest.mark.parametrize("folder", REPRODUCERS, ids=[p.name for p in REPRODUCERS])
def test_a_reproducer_is_read_or_refused_naming_its_file(folder: Path, tmp_path: Path) -> None:
    meta, request = read_reproducer(folder)
    case = request["case"] | {"reference": True}  # what was accepted must read the same there
    try:
        exercise(case, tmp_path)
    except CheckpointError as err:
        message = str(err)
        assert not OBJECT_REPR.search(message), message
        root = tmp_path / "case"
        named = [str(root / name) for name in case["files"]] + [str(root / case["entry"])]
        assert any(name in message for name in named), (meta["mutations"], message)
