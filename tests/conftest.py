"""Options of the whole test suite: `--fuzz-iterations N` and `--fuzz-seed S` for tests/fuzz;
with `LAZYPARAMS_REQUIRE_TVM=1` (CI's TVM step), a test skipped for lack of apache-tvm fails."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz", "the checkpoint fuzz campaign (tests/fuzz)")
    group.addoption(
        "--fuzz-iterations",
        type=int,
        default=None,
        help="cases per source format (default: $LAZYPARAMS_FUZZ_ITERATIONS, else the CI count)",
    )
    group.addoption(
        "--fuzz-seed",
        type=int,
        default=None,
        help="campaign seed (default: $LAZYPARAMS_FUZZ_SEED, else the CI seed)",
    )


def _fail_a_tvm_skip(report: Any) -> None:
    """Under `LAZYPARAMS_REQUIRE_TVM=1`, turn a skip whose reason names tvm into a failure:
    the TVM step must not pass by skipping what it exists to run."""
    if not report.skipped or os.environ.get("LAZYPARAMS_REQUIRE_TVM") != "1":
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if "tvm" in reason.lower():
        report.outcome = "failed"
        report.longrepr = f"LAZYPARAMS_REQUIRE_TVM=1, but skipped: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport() -> Generator[None, Any, None]:
    outcome = yield
    _fail_a_tvm_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report() -> Generator[None, Any, None]:
    outcome = yield
    _fail_a_tvm_skip(outcome.get_result())
