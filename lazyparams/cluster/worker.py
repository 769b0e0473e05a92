"""What runs on a Dask worker: the check that it sees the shared storage, and one part.

A worker opens SRC by path, plans the same partition as the client (kept per process, as
every part of a run shares it) and runs one part, writing each output at its offset in the
files of DST's work folder, then syncs them. Nothing here holds state the client needs: a
part run twice writes the same bytes to the same places. Imports the engine only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lazyparams.engine.compile import trace_transform
from lazyparams.engine.part_files import OffsetOutput
from lazyparams.engine.part_run import PartStats, run_part
from lazyparams.engine.partition import Partition, build_partition
from lazyparams.engine.plan import opened
from lazyparams.engine.specs import resolve_spec
from lazyparams.errors import ConvertError


@dataclass(frozen=True, slots=True)
class PartJob:
    """Everything a worker needs to run one part (small, so it travels with the task)."""

    spec: str | Callable[..., Any]
    spec_name: str
    job: str
    """What identifies the run (transform, source files, outputs), so a worker reuses its
    plan only for the same one."""
    source: str
    part: int
    part_size: int
    budget: int | None
    outputs: tuple[str, ...]
    targets: dict[str, tuple[str, int]]
    """Output name -> (file in the work folder, offset of its data)."""


@dataclass(frozen=True, slots=True)
class PartResult:
    """What a worker reports back for one part."""

    worker: str
    stats: PartStats
    outputs: tuple[str, ...]


_PARTITIONS: dict[tuple[Any, ...], Partition] = {}


def see_paths(expected: dict[str, tuple[int, int] | None]) -> list[str]:
    """The paths of `expected` this process cannot see as the client does.

    A value (size, mtime in ns) must match the file; None asks for a writable folder.
    """
    problems = []
    for path, stat in expected.items():
        try:
            found = os.stat(path)
        except OSError as err:
            problems.append(f"{path} ({err.strerror or err})")
            continue
        if stat is None and not os.access(path, os.W_OK | os.X_OK):
            problems.append(f"{path} (not writable)")
        elif stat is not None and (found.st_size, found.st_mtime_ns) != stat:
            problems.append(f"{path} (another file: size or time differ from the client's)")
    return problems


def run_part_job(job: PartJob, worker: str = "") -> PartResult:
    """Run part `job.part` into the work folder's files; sync them before returning."""
    partition = _partition(job)
    part = partition.parts[job.part]
    if tuple(info.name for info in part.outputs) != job.outputs:
        raise ConvertError(
            f"worker {worker or socket.gethostname()}: part {job.part} of {job.source} plans "
            "other outputs than the client's; expected the same lazyparams version and source"
        )
    output = OffsetOutput(job.targets, {info.name: info for info in part.outputs})
    with opened(job.source) as source:
        try:
            stats = run_part(partition, part, source, output)
            output.finalize()
        finally:
            output.close()
    return PartResult(worker, stats, job.outputs)


def _partition(job: PartJob) -> Partition:
    """The partition of the job's run, planned once per process."""
    key = (
        job.spec if isinstance(job.spec, str) else id(job.spec),
        job.source,
        job.part_size,
        job.budget,
    )
    if key not in _PARTITIONS:
        _PARTITIONS.clear()  # one run at a time keeps one plan in memory
        with opened(job.source) as source:
            traced = trace_transform(resolve_spec(job.spec, source, job.source).fn, source)
            _PARTITIONS[key] = build_partition(
                traced,
                source,
                spec=job.spec_name,
                workers=1,
                part_size=job.part_size,
                budget=job.budget,
            )
    return _PARTITIONS[key]


__all__ = ["PartJob", "PartResult", "run_part_job", "see_paths"]
