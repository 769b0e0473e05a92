"""Where in the user's transform an operation was written, for error messages.

A traced operation runs through several frontend frames before it reaches the IR; the user's
line is the innermost frame outside this package. Imports the standard library only.
"""

from __future__ import annotations

import inspect
import linecache
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lazyparams.errors import TraceError

_FRONTEND_DIR = str(Path(__file__).resolve().parent) + os.sep


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A file and line of the user's code, with the text of that line when it is readable."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def user_location() -> SourceLocation | None:
    """The innermost calling frame that is not frontend code, or None if every frame is."""
    frame = inspect.currentframe()
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_frontend_file(filename):
            line = frame.f_lineno
            return SourceLocation(filename, line, linecache.getline(filename, line).strip())
        frame = frame.f_back
    return None


@lru_cache(maxsize=256)
def _is_frontend_file(filename: str) -> bool:
    # Resolve only real paths: "<stdin>" and "<string>" are user code by definition.
    if filename.startswith("<"):
        return False
    return str(Path(filename).resolve()).startswith(_FRONTEND_DIR)


def trace_error(what: str, reason: str, location: SourceLocation | None = None) -> TraceError:
    """A TraceError reading "file:line: what: reason", followed by the offending source line."""
    where = location if location is not None else user_location()
    if where is None:
        return TraceError(f"{what}: {reason}")
    message = f"{where}: {what}: {reason}"
    if where.text:
        message += f"\n    {where.text}"
    return TraceError(message)
