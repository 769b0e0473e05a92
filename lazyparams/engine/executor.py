"""Executors: where a conversion's parts run when they do not run in this process.

`convert(..., cluster=...)` hands its job to an executor: a function that takes the
conversion's arguments and returns an `ExecutorReport`. Executors are found by name among the
`lazyparams.executors` entry points of the installed packages; lazyparams' own, `dask`, is
the cluster layer (the optional `lazyparams[dask]` extra), which sits above the engine: the
engine only knows this interface, never the layer. Imports the standard library and `errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol

from lazyparams.errors import ConvertError

GROUP = "lazyparams.executors"
"""The entry-point group executors are registered in (pyproject's `[project.entry-points]`)."""
DEFAULT = "dask"


class ExecutorReport(Protocol):
    """What any executor reports of a conversion, as `convert`'s own `Report` does."""

    @property
    def destination(self) -> str: ...
    @property
    def files(self) -> tuple[str, ...]: ...
    @property
    def resumed_outputs(self) -> int: ...
    @property
    def wall_seconds(self) -> float: ...
    @property
    def predicted_peak_bytes(self) -> int: ...
    @property
    def measured_peak_bytes(self) -> int: ...
    @property
    def bytes_read(self) -> int: ...
    @property
    def bytes_written(self) -> int: ...
    def summary(self) -> dict[str, Any]: ...


Executor = Callable[..., ExecutorReport]
"""`executor(transform, src, dst, *, cluster, **options) -> ExecutorReport`."""


def find_executor(name: str = DEFAULT) -> Executor:
    """The executor registered as `name`, or ConvertError saying what to install."""
    found = entry_points(group=GROUP, name=name)
    if not found:
        raise ConvertError(
            f"cluster: no executor {name!r} is installed (entry point group {GROUP!r}); "
            "expected lazyparams installed with its Dask executor: pip install 'lazyparams[dask]'"
        )
    try:
        executor: Executor = next(iter(found)).load()
    except ImportError as err:
        raise ConvertError(
            f"cluster: running on a cluster needs Dask ({err}); expected it installed: "
            "pip install 'lazyparams[dask]'"
        ) from None
    return executor


__all__ = ["DEFAULT", "GROUP", "Executor", "ExecutorReport", "find_executor"]
