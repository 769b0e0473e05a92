"""Executors: where a conversion's parts run when they do not run in this process.

`convert(..., cluster=...)` hands its job to an executor: a function that takes the
conversion's arguments and returns an `ExecutorReport`. Executors are found by name among the
`lazyparams.executors` entry points of the installed packages; lazyparams' own, `dask`, is
the cluster layer (the optional `lazyparams[dask]` extra), which sits above the engine: the
engine only knows this interface, never the layer. Imports the standard library and `errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol, TypedDict, Unpack

from lazyparams.errors import ConvertError

GROUP = "lazyparams.executors"
"""The entry-point group executors are registered in (pyproject's `[project.entry-points]`)."""
DEFAULT = "dask"


class ExecutorReport(Protocol):
    """What any executor reports of a conversion: the two peaks, as `convert`'s own `Report`
    gives them, and `summary()`, plain data (for JSON) that names at least the destination,
    its files, the bytes read and written, the outputs resumed and the wall time."""

    @property
    def predicted_peak_bytes(self) -> int: ...
    @property
    def measured_peak_bytes(self) -> int: ...
    def summary(self) -> dict[str, Any]: ...


class SharedOptions(TypedDict, total=False):
    """The options of `convert` that an executor takes too (see `convert` for each)."""

    budget: int | str | None
    format: str | None
    shard_size: int | str | None
    resume: bool
    progress: bool
    metadata: Mapping[str, Any] | None


class ExecutorOptions(SharedOptions, total=False):
    """What `convert` hands an executor besides the cluster."""

    part_size: int | str | None


class Executor(Protocol):
    """`executor(transform, src, dst, *, cluster, **options)`: a conversion run elsewhere."""

    def __call__(
        self,
        transform: Any,
        src: Any,
        dst: Any,
        *,
        cluster: Any,
        **options: Unpack[ExecutorOptions],
    ) -> ExecutorReport: ...


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


__all__ = [
    "DEFAULT",
    "GROUP",
    "Executor",
    "ExecutorOptions",
    "ExecutorReport",
    "SharedOptions",
    "find_executor",
]
