"""`convert_on_cluster`: a partitioned conversion run as Dask tasks, published by the client.

Everything is checked before any data moves: the transform against SRC's header, DST, every
part against the per-worker budget, and that every worker sees SRC and DST's work folder as
the client does. The client lays out the output in the work folder; each part's task writes
its outputs there by offset and the client journals the part when it is done, so a killed
worker's part simply runs again elsewhere and a killed client resumes with only the missing
parts. Imports the engine and `distributed`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from distributed import Client, Future, KilledWorker, as_completed, get_worker

from lazyparams.cluster.connect import Workers, check_capacity, cluster_workers, connect
from lazyparams.cluster.report import ClusterBars, ClusterReport, WorkerReport, worker_reports
from lazyparams.cluster.staging import Staged, stage_output
from lazyparams.cluster.worker import PartJob, PartResult, run_part_job, see_paths
from lazyparams.engine.convert import prepare
from lazyparams.engine.executor import ExecutorOptions
from lazyparams.engine.journal import keeps_partial
from lazyparams.engine.part_files import CheckpointSource, IRModule
from lazyparams.engine.partition import Part, Partition, build_partition
from lazyparams.engine.plan import Source, Spec, opened
from lazyparams.engine.sizes import size_or_none
from lazyparams.errors import ConvertError


@dataclass(frozen=True, slots=True)
class _Run:
    spec: Spec
    src: str
    partition: Partition
    staged: Staged
    workers: Workers
    job: str


def convert_on_cluster(
    transform: Spec, src: Source, dst: Any, *, cluster: Any, **options: Unpack[ExecutorOptions]
) -> ClusterReport:
    """Convert `src` into the path `dst` on the Dask `cluster` (a Client, an address or
    `local:N`), each part on a worker within `budget` (per worker). Options are as for
    `convert`; `part_size` is the bytes a part writes (default: `shard_size`)."""
    started = time.perf_counter()
    limit = size_or_none(options.get("budget"), "budget")
    shard = size_or_none(options.get("shard_size"), "shard_size")
    size = size_or_none(options.get("part_size"), "part_size")
    resume, metadata = options.get("resume", False), options.get("metadata")
    src_path = _shared_path(src, "SRC")
    _shared_path(dst, "DST")
    with opened(src_path) as source:
        prepared = prepare(
            transform, source, src_path, dst, options.get("format"), shard, resume, metadata
        )
        resolved, traced, target = prepared.resolved, prepared.traced, prepared.target
        job = prepared.job
        try:
            with connect(cluster, limit) as client:
                workers = cluster_workers(client)
                sizes = (size, shard, limit)
                partition = _partitioned(traced, source, resolved.name, workers, sizes)
                staged = stage_output(target, job, partition, source)
                run = _Run(transform, src_path, partition, staged, workers, json.dumps(job))
                resumed = len(staged.done)
                results = _run_parts(client, run, source, options.get("progress", True))
            target.publish_side_files()  # a merged folder's config.json and tokenizer
        finally:
            target.release()  # the destination's lock, taken by prepare
    return ClusterReport(
        partition=partition,
        destination=str(target.path),
        files=tuple(str(f) for f in target.files()),
        parts_run=len(results),
        resumed_outputs=resumed,
        wall_seconds=time.perf_counter() - started,
        workers=worker_reports(results, workers, limit),
    )


def _partitioned(
    traced: IRModule,
    source: CheckpointSource,
    spec: str,
    workers: Workers,
    sizes: tuple[int | None, int | None, int | None],
) -> Partition:
    """The partition for these workers (`sizes`: part size, shard size, budget), refused
    before anything runs if a part exceeds the budget or no worker's budget holds the largest."""
    part_size, shard_size, budget = sizes
    partition = build_partition(
        traced,
        source,
        spec=spec,
        workers=len(workers.budgets),
        part_size=part_size,
        shard_size=shard_size,
        budget=budget,
    )
    partition.check_budget()
    check_capacity(workers, partition.predicted_peak_bytes)
    return partition


def _shared_path(path: Any, what: str) -> str:
    """`path` made absolute: workers open it by path, so it must be one."""
    if not isinstance(path, str | Path):
        raise ConvertError(
            f"{what}: a cluster reads and writes by path; expected a path on storage every "
            f"worker sees, got a {type(path).__name__}"
        )
    return str(Path(path).absolute())


def _run_parts(
    client: Client, run: _Run, source: CheckpointSource, progress: bool
) -> list[PartResult]:
    """Check the workers see the storage, run the missing parts, then publish the output."""
    try:
        _check_storage(client, run, source)
    except BaseException:
        run.staged.stop(keep=run.staged.resuming)  # nothing ran: a fresh work folder goes
        raise
    try:
        done = run.staged.done
        todo = [p for p in run.partition.parts if not {o.name for o in p.outputs} <= done]
        results = _submit_and_collect(client, run, todo, progress)
        run.staged.publish()
    except BaseException as failure:
        run.staged.stop(keep=keeps_partial(failure))
        raise
    return results


def _check_storage(client: Client, run: _Run, source: CheckpointSource) -> None:
    """Every worker sees SRC's files and the work folder as the client does, or ConvertError."""
    expected = run.staged.expected_paths(source, run.spec)
    seen: dict[str, list[str]] = client.run(see_paths, expected)
    for worker, problems in sorted(seen.items()):
        if problems:
            raise ConvertError(
                f"cluster worker {worker}: cannot see {problems[0]}; expected SRC and DST's "
                "folder on storage every worker shares, at the same paths"
            )


def _submit_and_collect(
    client: Client, run: _Run, todo: Sequence[Part], progress: bool
) -> list[PartResult]:
    """Submit one task per part (largest first) and journal each as it finishes."""
    token = uuid.uuid4().hex[:8]
    futures: dict[Future[PartResult], Part] = {}
    for part in sorted(todo, key=lambda p: -p.work_bytes):
        futures[_submit(client, run, part, token)] = part
    results: list[PartResult] = []
    bars = ClusterBars(todo, enabled=progress)
    try:
        with bars:
            for future in as_completed(futures):
                result = _result(future, futures[future])
                run.staged.record(result.outputs)
                results.append(result)
                bars.part_done(futures[future])
    finally:
        client.cancel(list(futures))
    bars.print_workers(worker_reports(results, run.workers, run.partition.budget))
    return results


def _submit(client: Client, run: _Run, part: Part, token: str) -> Future[PartResult]:
    """Submit one part as a task asking for its predicted peak of the memory resource."""
    job = PartJob(
        spec=_spec_for_workers(run.spec),
        spec_name=run.partition.spec,
        job=run.job,
        source=run.src,
        part=part.index,
        part_size=run.partition.part_size,
        budget=run.partition.budget,
        outputs=tuple(info.name for info in part.outputs),
        targets={info.name: run.staged.target(info.name) for info in part.outputs},
    )
    return client.submit(
        _run_on_worker,
        job,
        key=f"lazyparams-part-{part.index}-{token}",
        resources=run.workers.resources(part.predicted_peak_bytes),
        priority=part.work_bytes,
        pure=False,
    )


def _spec_for_workers(spec: Spec) -> str | Any:
    """The spec as a worker loads it: a spec file by its absolute path (workers have their own
    working folders), a recipe, a callable or a target object (`gguf` with options) as given."""
    if callable(spec) or not isinstance(spec, str | os.PathLike):
        return spec
    text = str(spec)
    return str(Path(text).absolute()) if Path(text).is_file() else text


def _run_on_worker(job: PartJob) -> PartResult:
    """The task: run one part on the worker it landed on, naming that worker."""
    return run_part_job(job, worker=get_worker().address)


def _result(future: Future[PartResult], part: Part) -> PartResult:
    """The part's result; its error (a lazyparams error as raised on the worker) otherwise."""
    try:
        result = future.result()
    except KilledWorker as err:
        raise ConvertError(
            f"part {part.index}: every worker that ran it died ({err}); expected workers that "
            "stay up (look for memory limits or crashes in the worker logs)"
        ) from None
    assert isinstance(result, PartResult)
    return result


__all__ = ["ClusterReport", "WorkerReport", "convert_on_cluster"]
