"""`lazyparams.trace`, `.plan`, `.convert` and `.ops` load on first use: the import stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import lazyparams
from lazyparams.engine import convert, plan
from lazyparams.frontend import ops, trace
from tests.engine.helpers import cli_env

CHECK = """
import sys, lazyparams
heavy = [m for m in ("lazyparams.engine", "lazyparams.frontend", "rich") if m in sys.modules]
assert heavy == [], heavy
assert lazyparams.plan.__module__ == "lazyparams.engine.plan"
assert "lazyparams.engine" in sys.modules
"""


def test_the_lazy_exports_are_the_real_functions() -> None:
    assert lazyparams.plan is plan and lazyparams.convert is convert
    assert lazyparams.trace is trace and lazyparams.ops is ops
    assert {"plan", "convert", "trace", "ops"} <= set(dir(lazyparams))
    with pytest.raises(AttributeError, match="module 'lazyparams' has no attribute 'nothing'"):
        _ = lazyparams.nothing  # type: ignore[attr-defined]


def test_importing_lazyparams_loads_neither_engine_nor_frontend(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=tmp_path, env=cli_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
