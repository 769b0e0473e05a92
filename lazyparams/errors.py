"""The typed error hierarchy shared by every layer.

Every error lazyparams raises for bad input derives from `LazyParamsError`, so a caller (and the
CLI) can tell user errors from bugs. This module imports nothing from the package.
"""

from __future__ import annotations


class LazyParamsError(Exception):
    """Base of every error caused by bad input rather than by a bug in lazyparams."""


class ParseError(LazyParamsError):
    """Script text that does not follow the script syntax; the message names file:line:col."""

    def __init__(
        self,
        message: str,
        *,
        file: str = "<script>",
        line: int = 0,
        col: int = 0,
        source_line: str | None = None,
    ) -> None:
        self.file, self.line, self.col, self.source_line = file, line, col, source_line
        self.reason = message
        text = f"{file}:{line}:{col}: {message}"
        if source_line is not None:
            text += f"\n    {source_line}\n    {' ' * max(col - 1, 0)}^"
        super().__init__(text)


class StructInfoError(LazyParamsError):
    """An operator applied to operands of the wrong rank, dtype or shape."""


class WellFormedError(LazyParamsError):
    """A module that breaks an IR invariant; the message names the binding."""


class TransformError(LazyParamsError):
    """A pass was given a function it cannot rewrite; the message says what it expected."""


class BudgetError(LazyParamsError):
    """The planned peak memory does not fit the budget; names the binding and the minimum."""


class RuntimeExecError(LazyParamsError):
    """The virtual machine could not execute a binding (missing extern, shape mismatch, ...)."""


class CheckpointError(LazyParamsError):
    """A checkpoint file that cannot be read or written; the message names the file."""


class OutputError(CheckpointError):
    """Writing or publishing the output failed in a way a rerun can get past (a full disk, a
    file size limit, a failing device): the partial output is kept for `--resume`."""


class TraceError(LazyParamsError):
    """A traced transform did something unsupported; the message names the user's source line."""


class ConvertError(LazyParamsError):
    """A conversion refused before reading data (missing input, unwritable output, ...)."""
