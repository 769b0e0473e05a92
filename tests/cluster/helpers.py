"""Faults the cluster tests install in one worker process (run there with `client.run`).

Each patch changes only the process it runs in, so the other workers, and a worker the nanny
restarts, behave normally.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lazyparams.engine.part_files as part_files
import lazyparams.engine.part_run as part_run
from lazyparams.errors import CheckpointError

_SAVED: dict[str, Any] = {}


def die_on_first_write(marker: str) -> int:
    """Make this worker process die (SIGKILL-like `os._exit`) at its first output write,
    after touching `marker`; returns the pid."""

    def dying(self: Any, name: str, array: Any) -> None:
        Path(marker).write_text(str(os.getpid()))
        os._exit(1)

    part_files.OffsetOutput.write = dying  # type: ignore[method-assign]
    return os.getpid()


def hide_path(hidden: str) -> None:
    """Make every path under `hidden` invisible to `os.stat` in this process."""
    original = _SAVED.setdefault("stat", os.stat)

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith(hidden):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return original(path, *args, **kwargs)

    os.stat = stat  # type: ignore[assignment]


def fail_load_of(name: str) -> None:
    """Make loading tensor `name` fail in this process, as a damaged tensor would."""
    original = _SAVED.setdefault("load", part_run.RenamedSource.load)

    def load(self: Any, wanted: str) -> Any:
        if self.renames[wanted] == name:
            raise CheckpointError(f"tensor {name!r}: damaged data; expected a readable tensor")
        return original(self, wanted)

    part_run.RenamedSource.load = load  # type: ignore[method-assign]


def restore() -> None:
    """Undo `hide_path` and `fail_load_of` in this process."""
    if "stat" in _SAVED:
        os.stat = _SAVED.pop("stat")
    if "load" in _SAVED:
        part_run.RenamedSource.load = _SAVED.pop("load")  # type: ignore[method-assign]
