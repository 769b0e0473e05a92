"""Worker actions that misbehave on purpose, so the tests can check the pool catches each way.

Each has the signature of `tests.fuzz.worker.exercise`: (case, work folder) -> extra reply.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError


def hang(case: dict[str, Any], work: Path) -> None:
    """Never answers (in C code, like a reader stuck in a native loop)."""
    time.sleep(3600)


def allocate(case: dict[str, Any], work: Path) -> None:
    """Asks for more memory than a worker may have."""
    bytearray(8 << 30)


def grow(case: dict[str, Any], work: Path) -> None:
    """Touches 100 MiB and then refuses: bounded by the limit, not by the 64 MiB allowed."""
    block = b"x" * (100 << 20)
    raise CheckpointError(f"refused after touching {len(block)} bytes")


def die(case: dict[str, Any], work: Path) -> None:
    """Dies as a segfaulting extension would."""
    os.kill(os.getpid(), signal.SIGSEGV)


def foreign_error(case: dict[str, Any], work: Path) -> None:
    """Raises an exception outside lazyparams' hierarchy."""
    raise KeyError("not a lazyparams error")


def refuse(case: dict[str, Any], work: Path) -> None:
    """Refuses cleanly, as a reader should."""
    raise CheckpointError("x.bin: refused cleanly")


def succeed(case: dict[str, Any], work: Path) -> dict[str, Any]:
    """Succeeds, reporting the case it got."""
    return {"entry": case["entry"]}
