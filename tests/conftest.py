"""Options of the whole test suite: `--fuzz-iterations N` and `--fuzz-seed S` for tests/fuzz."""

from __future__ import annotations

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
