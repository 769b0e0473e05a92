"""`convert(transform, src, dst)`: run a plan through the VM, streaming source to destination.

Every check happens before any tensor data is read: the transform is traced against the
source's header, the destination must not exist, the budget must hold, and the output's
temporaries must be creatable. The VM then loads each input with the source's `load` as
`get_item` and hands each output to the destination as `set_item`. Imports every layer below.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Unpack, overload

import lazyparams.script  # noqa: F401 - the printer: a job is identified by its script text
from lazyparams.engine.chunking import row_externs, takes_rows
from lazyparams.engine.compile import FUNC, function_of, names_of, output_infos, trace_transform
from lazyparams.engine.destination import (
    Destination,
    destination,
    job_description,
    source_header_metadata,
)
from lazyparams.engine.executor import ExecutorOptions, ExecutorReport, SharedOptions, find_executor
from lazyparams.engine.fingerprint import DEFAULT_MODE, check_mode
from lazyparams.engine.format_choice import choose_format, file_metadata, format_notices
from lazyparams.engine.journal import keeps_partial
from lazyparams.engine.memory_limit import BudgetChoice, choose_budget, given_budget
from lazyparams.engine.output import Output
from lazyparams.engine.plan import Plan, Source, Spec, build_plan, check_workers, opened
from lazyparams.engine.progress import Bars, Counter
from lazyparams.engine.resident import PeakResident, release_freed_memory_promptly
from lazyparams.engine.sizes import size_or_none
from lazyparams.engine.slow_loops import slow_loops_notice
from lazyparams.engine.specs import ResolvedSpec, resolve_spec
from lazyparams.errors import ConvertError
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.io.mapguard import forget_earlier_faults, raise_if_source_shrank
from lazyparams.ir import IRModule, structural_hash
from lazyparams.runtime import MemoryStats, VirtualMachine
from lazyparams.runtime.parallel import ParallelRunner


@dataclass(frozen=True, slots=True)
class Report:
    """What a conversion did: the plan it ran, what it read and wrote, time and memory.

    `measured_peak_bytes` is the VM's own meter; `peak_rss_bytes` the process's resident
    memory at its peak over the resident size when the run started (None where it cannot be
    measured). After a resume, the plan and the counts cover only the outputs still missing.
    """

    plan: Plan
    destination: str
    files: tuple[str, ...]
    tensors_read: int
    bytes_read: int
    tensors_written: int
    bytes_written: int
    resumed_outputs: int
    discarded_partial: bool
    wall_seconds: float
    measured_peak_bytes: int | None
    peak_rss_bytes: int | None

    @property
    def predicted_peak_bytes(self) -> int:
        """The plan's predicted peak."""
        return self.plan.predicted_peak_bytes

    @property
    def eager_peak_bytes(self) -> int:
        """The peak of the same transform run eagerly (everything in memory)."""
        return self.plan.eager_peak_bytes

    def summary(self) -> dict[str, Any]:
        """The report as plain data (for JSON): the plan's summary, then every other field."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "plan"}
        return {**self.plan.summary(), **own, "files": list(self.files)}


@dataclass(frozen=True, slots=True)
class _Run:
    counter: Counter
    measured_peak_bytes: int | None
    peak_rss_bytes: int | None


class ConvertOptions(SharedOptions, total=False):
    """The keyword arguments of `convert` with or without a cluster (see `convert`)."""

    verify_resume: str
    workers: int
    allow_outside_links: bool
    notice: Callable[[str], None] | None


@overload
def convert(
    transform: Spec,
    src: Source,
    dst: Any,
    *,
    cluster: None = ...,
    **options: Unpack[ConvertOptions],
) -> Report: ...


@overload
def convert(
    transform: Spec,
    src: Source,
    dst: Any,
    *,
    cluster: object,
    part_size: int | str | None = ...,
    **options: Unpack[ConvertOptions],
) -> ExecutorReport: ...


def convert(
    transform: Spec,
    src: Source,
    dst: Any,
    *,
    budget: int | str | None = None,
    format: str | None = None,
    shard_size: int | str | None = None,
    resume: bool = False,
    verify_resume: str = DEFAULT_MODE,
    progress: bool = True,
    workers: int = 1,
    metadata: Mapping[str, Any] | None = None,
    cluster: object = None,
    part_size: int | str | None = None,
    allow_outside_links: bool = False,
    notice: Callable[[str], None] | None = None,
) -> Report | ExecutorReport:
    """Convert the checkpoint `src` with `transform` into `dst`, in bounded memory.

    `transform` and `src` are as for `plan`. `dst` is a path (safetensors unless its extension or
    `format` names another of `io.output_formats`: npz, npy, gguf, pytorch; `shard_size` splits
    safetensors into shards with an index, and GGUF into llama.cpp's split parts), a dict that
    receives the outputs, or a sink. `metadata`
    (GGUF output only) holds the key/value pairs written to the file (see `lazyparams.io.GGUFSink`).
    `budget` refuses the run if the predicted peak exceeds it (after splitting row-wise steps into
    blocks); without one the run takes the default of `plan`, and `"none"` turns it off. Output
    appears at `dst` only when complete; a run that is interrupted, or fails in a way a rerun can
    get past (see `journal.keeps_partial`), keeps its work beside `dst`, and `resume=True`
    continues it, computing only the missing outputs, to a
    byte-identical result; what it reuses is checked by content (the source files against the
    fingerprints recorded when the run started: `verify_resume="full"`, the default, CRCs every
    byte, so any changed byte is caught, at the cost of one read of the source at the start and at
    the resume; `"sampled"` hashes a file's header and spread blocks only (see `fingerprint`); the
    other formats' outputs against their recorded CRCs). `workers` > 1 runs that many independent
    steps at once (loads ahead of computing, writes beside it), never holding more than the budget
    (without one, `plan.worker_budget_bytes`). `progress` draws bars on stderr. `cluster` (a
    `distributed.Client`, a scheduler address or `local:N`) runs the plan's parts of `part_size`
    bytes as Dask tasks, each worker within `budget` (no default there), and returns the executor's
    report (`ExecutorReport`: the same peaks and summary; the Dask executor's is
    `lazyparams.cluster.ClusterReport`).
    `allow_outside_links` is as for `plan` (one machine only: cluster workers open SRC alone).
    `notice` receives one-line warnings about the run before any data is read (the compiled
    loops missing where the plan quantizes to GGML block types, and what that costs).
    """
    if cluster is not None or part_size is not None:  # a ClusterReport
        return _on_cluster(
            transform,
            src,
            dst,
            cluster,
            workers,
            allow_outside_links,
            budget=given_budget(budget),
            format=format,
            shard_size=shard_size,
            part_size=part_size,
            resume=resume,
            progress=progress,
            metadata=metadata,
        )
    started = time.perf_counter()
    choice = choose_budget(budget)
    shard = size_or_none(shard_size, "shard_size")
    check_workers(workers)
    with opened(src, allow_outside_links) as source:
        prepared = prepare(
            transform, source, src, dst, format, shard, resume, metadata, verify_resume
        )
        try:
            the_plan, discarded, run = _plan_and_write(
                prepared, source, choice, workers, progress, notice
            )
        finally:
            prepared.target.release()  # the destination's lock, taken by prepare
    return _report(the_plan, prepared.target, run, discarded, time.perf_counter() - started)


def _plan_and_write(
    prepared: Prepared,
    source: CheckpointSource,
    choice: BudgetChoice,
    workers: int,
    progress: bool,
    notice: Callable[[str], None] | None = None,
) -> tuple[Plan, bool, _Run]:
    """Plan the outputs still missing, check the budget, then write them."""
    target, resolved = prepared.target, prepared.resolved
    missing = [info.name for info in prepared.outputs if info.name not in target.done]
    the_plan = build_plan(
        prepared.traced,
        source,
        spec=resolved.name,
        keep=missing,
        budget=choice.nbytes,
        workers=workers,
        rows=takes_rows(target),
    )
    the_plan = replace(the_plan, target=resolved.describe(the_plan.outputs), budget_choice=choice)
    the_plan.check_budget()
    warnings = [*prepared.notes, slow_loops_notice(the_plan.function)]
    for warning in warnings:
        if warning is not None and notice is not None:
            notice(warning)
    discarded = target.has_partial and not target.resuming
    return the_plan, discarded, _write(the_plan, source, target, prepared.job, progress)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A conversion checked before any data is read: the SPEC bound to the model folder, its
    traced module and outputs, the prepared destination and the job it identifies."""

    resolved: ResolvedSpec
    traced: IRModule
    outputs: tuple[TensorInfo, ...]
    target: Destination
    job: dict[str, Any]
    notes: tuple[str, ...] = ()
    """Notices about the output (see `format_choice.format_notices`)."""


def prepare(
    transform: Spec,
    source: CheckpointSource,
    src: Source,
    dst: Any,
    format: str | None,
    shard_size: int | None,
    resume: bool,
    metadata: Mapping[str, Any] | None,
    verify: str = DEFAULT_MODE,
) -> Prepared:
    """Trace SPEC against the source, choose and check the destination (format, metadata; a
    safetensors output keeps a safetensors source's `__metadata__`) and prepare it (an
    existing output refused, an interrupted one read for resume)."""
    resolved = resolve_spec(transform, source, src)
    traced = trace_transform(resolved.fn, source)
    outputs = output_infos(traced)
    chosen = choose_format(dst, format, resolved)
    meta = file_metadata(resolved, outputs, metadata, chosen)
    target = destination(
        dst, outputs, format=chosen, shard_size=shard_size, resume=resume, metadata=meta
    )
    if target.path is not None:
        target.header_metadata = source_header_metadata(source)
        if resolved.side_files is not None and target.path.suffix == "":
            target.side_files = resolved.side_files(outputs)
    job = job_description(transform_identity(traced), source, outputs, target, check_mode(verify))
    target.prepare(job)
    notes = format_notices(source, chosen, resolved, meta)
    return Prepared(resolved, traced, outputs, target, job, notes)


def transform_identity(traced: IRModule) -> str:
    """What identifies a traced transform for a resume: its structural hash (its printed text
    would spell out every constant, an index table per weight of a large model), numpy kernels
    named by their extern names as the calls name them (a Python function has no stable
    identity across processes)."""
    kernels = traced.attrs.get("numpy_kernels")
    if kernels:
        attrs = {**traced.attrs, "numpy_kernels": sorted(kernels)}
        traced = IRModule({name: traced[name] for name in traced}, attrs)
    return f"{structural_hash(traced):016x}"


def _on_cluster(
    transform: Spec,
    src: Source,
    dst: Any,
    cluster: object,
    workers: int,
    allow_outside_links: bool,
    **options: Unpack[ExecutorOptions],
) -> ExecutorReport:
    """The conversion as parts on a cluster, by the installed executor (see `executor`)."""
    if cluster is None:
        raise ConvertError("part_size: applies to a conversion on a cluster; expected cluster=")
    if workers != 1:
        raise ConvertError(f"workers: applies to one machine, got {workers} with a cluster")
    if allow_outside_links:
        raise ConvertError(
            "allow_outside_links: applies to a conversion on one machine; cluster workers "
            "open SRC themselves and keep its files inside its folder"
        )
    return find_executor()(transform, src, dst, cluster=cluster, **options)


def _report(plan: Plan, target: Destination, run: _Run, discarded: bool, seconds: float) -> Report:
    counter = run.counter
    return Report(
        plan=plan,
        destination=str(target.path or type(target.target).__name__),
        files=tuple(str(f) for f in target.files()),
        tensors_read=counter.tensors_read,
        bytes_read=counter.bytes_read,
        tensors_written=counter.tensors_written,
        bytes_written=counter.bytes_written,
        resumed_outputs=len(target.done),
        discarded_partial=discarded,
        wall_seconds=seconds,
        measured_peak_bytes=run.measured_peak_bytes,
        peak_rss_bytes=run.peak_rss_bytes,
    )


def _write(
    plan: Plan, source: CheckpointSource, target: Destination, job: dict[str, Any], progress: bool
) -> _Run:
    """Open the output, run the plan into it and publish it; on a failure a rerun can get
    past keep what resumes, on any other remove it (see `keeps_partial`)."""
    output = target.open(job)
    written = sum(info.nbytes for info in target.outputs if info.name in target.done)
    total = written + plan.bytes_out
    counter = Bars(plan.bytes_in, total, written) if progress else Counter()
    try:
        with counter:
            run = _execute(plan, source, output, counter) if plan.outputs else None
        output.finalize()
        target.publish_side_files()
    except BaseException as failure:
        if keeps_partial(failure):
            output.suspend()
        else:
            output.abort()
        raise
    return run or _Run(counter, None, None)


def _execute(plan: Plan, source: CheckpointSource, output: Output, counter: Counter) -> _Run:
    """Run the lazy function once: `get_item` loads from the source, `set_item` writes.

    Outputs may be written from several threads at once (every `Output` allows it); loads
    are taken one at a time, as a source need not allow more.
    """
    func = function_of(plan.module)
    inputs, outputs = names_of(func, "input_names"), names_of(func, "output_names")
    loading = threading.Lock()
    forget_earlier_faults()

    def get_item(index: int) -> Any:
        name = inputs[int(index)]
        with loading:
            array = source.load(name)
        counter.loaded(name, int(array.nbytes))
        return array

    def set_item(index: int, value: Any) -> None:
        name = outputs[int(index)]
        output.write(name, value)
        raise_if_source_shrank()  # a sink keeping arrays in memory writes no file to check
        counter.wrote(name, int(value.nbytes))

    externs: dict[str, Callable[..., Any]] = dict(plan.module.attrs.get("numpy_kernels", {}))
    externs.update(get_item=get_item, set_item=set_item)
    externs.update(row_externs(plan.module, plan.outputs, source, output, counter, loading))
    vm = VirtualMachine(plan.module, externs)
    release_freed_memory_promptly()
    gc.collect()  # garbage from tracing must not be freed inside the measured window
    with PeakResident() as resident:
        stats = _run_lazy(plan, vm)
    raise_if_source_shrank()
    return _Run(counter, stats.peak_bytes, resident.peak_bytes)


def _run_lazy(plan: Plan, vm: VirtualMachine) -> MemoryStats:
    """Run the plan's lazy function: in order on the VM, or on `plan.workers` threads within
    `plan.worker_budget_bytes`; returns the memory the run held."""
    budget = plan.worker_budget_bytes
    if budget is None:
        vm[FUNC]()
        return vm.stats
    runner = ParallelRunner(vm, FUNC, workers=plan.workers, budget=budget, model=plan.parallel)
    runner()
    return runner.stats
