"""Partitioned plans: a conversion split into parts that can run on different machines.

A part is a run of units (see `grouping`) in output order: the outputs it writes, the inputs
it reads, and for each unit the compiled lazy function it runs (one per unit signature, with
tensors renamed), chunked to the per-worker budget as on one machine. Parts are cut to a size
(`part_size`, by default the output shard size) and balanced; a part whose peak exceeds the
budget refuses the whole plan before anything runs. Imports the engine's own modules, `io`
and `ir`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lazyparams.engine.compile import function_of, names_of, output_infos, trace_transform
from lazyparams.engine.grouping import Unit, find_units, unit_module
from lazyparams.engine.memory_limit import given_budget
from lazyparams.engine.plan import (
    Plan,
    ReadsWrites,
    Source,
    Spec,
    build_plan,
    check_target_output,
    check_workers,
    opened,
    total_bytes,
)
from lazyparams.engine.sizes import format_bytes, size_or_none
from lazyparams.engine.specs import resolve_spec
from lazyparams.errors import BudgetError, ConvertError
from lazyparams.frontend.tracing import collection_paused
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.ir import Call, ExternFunc, IRModule, PrimValue
from lazyparams.ir.prim import IntImm
from lazyparams.transform.chunk_rows import SET_ROWS

PARTS_PER_WORKER = 4
"""Without a part size or output shards, a plan has this many parts per worker."""


@dataclass(frozen=True, slots=True)
class Part(ReadsWrites):
    """Outputs one task writes: its units, what it reads and writes, and its predicted peak.

    `bytes_in` counts every read of the part's units, so an input two parts share is counted
    in both; `peak_output` is the first output of the unit at the peak.
    """

    index: int
    units: tuple[int, ...]
    outputs: tuple[TensorInfo, ...]
    inputs: tuple[TensorInfo, ...]
    predicted_peak_bytes: int
    peak_output: str

    @property
    def work_bytes(self) -> int:
        """Bytes read and written: the measure parts are balanced by."""
        return self.bytes_in + self.bytes_out


@dataclass(frozen=True, slots=True)
class Template:
    """The plan compiled for one unit signature, and the unit it was compiled for."""

    plan: Plan
    unit: Unit

    def run_for(
        self, unit: Unit, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]
    ) -> UnitRun:
        """How to run `unit`, of this template's signature: the plan, with the tensor names of
        the template's unit mapped to `unit`'s (`inputs` and `outputs` are the partition's)."""
        ins = zip(self.unit.inputs, unit.inputs, strict=True)
        outs = zip(self.unit.outputs, unit.outputs, strict=True)
        return UnitRun(
            self.plan,
            {inputs[a].name: inputs[b].name for a, b in ins},
            {outputs[a].name: outputs[b].name for a, b in outs},
        )


@dataclass(frozen=True, slots=True)
class UnitRun:
    """How to run one unit: the plan compiled for its signature, and the renaming from that
    plan's tensor names (of the unit it was compiled for) to this unit's."""

    plan: Plan
    inputs: dict[str, str]
    outputs: dict[str, str]


@dataclass(frozen=True, slots=True)
class Partition:
    """A conversion cut into parts; `check_budget` refuses it when a part exceeds the budget.

    `units` are the groups of outputs computed together (see `grouping`), in output order; a
    part runs a run of them. `budget` is per worker, and `templates` hold one compiled plan per
    unit signature.
    """

    spec: str
    source: str
    traced: IRModule
    units: tuple[Unit, ...]
    parts: tuple[Part, ...]
    part_size: int
    budget: int | None
    workers: int
    input_infos: tuple[TensorInfo, ...] = field(repr=False)
    output_infos: tuple[TensorInfo, ...] = field(repr=False)
    templates: dict[Hashable, Template] = field(repr=False)

    @property
    def bytes_in(self) -> int:
        """Bytes all parts read, shared inputs counted once per part."""
        return sum(part.bytes_in for part in self.parts)

    @property
    def duplicated_bytes(self) -> int:
        """Bytes read more than once: read by several units, as no part could hold them all."""
        once = {info.name: info.nbytes for part in self.parts for info in part.inputs}
        return self.bytes_in - sum(once.values())

    @property
    def bytes_out(self) -> int:
        """Bytes all parts write (each output once)."""
        return sum(part.bytes_out for part in self.parts)

    @property
    def predicted_peak_bytes(self) -> int:
        """The largest peak of any part: what one worker needs at least."""
        return max((part.predicted_peak_bytes for part in self.parts), default=0)

    @property
    def longest_part(self) -> Part | None:
        """The part with the most bytes to read and write."""
        return max(self.parts, key=lambda part: part.work_bytes, default=None)

    @property
    def balance(self) -> float:
        """The longest part's bytes over the mean part's (1.0 is perfect balance)."""
        longest = self.longest_part
        if longest is None or not longest.work_bytes:
            return 1.0
        mean = sum(part.work_bytes for part in self.parts) / len(self.parts)
        return longest.work_bytes / mean

    def unit_runs(self, part: Part) -> list[UnitRun]:
        """The compiled plan and renaming of each unit of `part`, in order."""
        return [self._unit_run(self.units[u]) for u in part.units]

    def _unit_run(self, unit: Unit) -> UnitRun:
        """The template of `unit`'s signature, run for `unit`."""
        return self.templates[unit.signature].run_for(unit, self.input_infos, self.output_infos)

    def check_budget(self) -> None:
        """Refuse the plan, naming the part and its peak, if a part exceeds the budget."""
        if self.budget is None:
            return
        for part in self.parts:
            if part.predicted_peak_bytes > self.budget:
                raise BudgetError(
                    f"part {part.index} ({len(part.outputs)} outputs from "
                    f"{part.outputs[0].name!r}) needs {format_bytes(part.predicted_peak_bytes)} "
                    f"at its peak (computing {part.peak_output!r}); expected every part within "
                    f"the per-worker budget of {format_bytes(self.budget)}"
                )

    def summary(self) -> dict[str, Any]:
        """The partition's numbers as plain data (for JSON reports)."""
        longest = self.longest_part
        return {
            "spec": self.spec,
            "source": self.source,
            "workers": self.workers,
            "parts": len(self.parts),
            "part_size": self.part_size,
            "units": len(self.units),
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "duplicated_bytes": self.duplicated_bytes,
            "predicted_peak_bytes": self.predicted_peak_bytes,
            "budget": self.budget,
            "longest_part": None if longest is None else longest.index,
            "balance": self.balance,
            "part_table": [_part_row(part) for part in self.parts],
        }


def _part_row(part: Part) -> dict[str, Any]:
    """One row of the JSON part table."""
    return {
        "part": part.index,
        "outputs": len(part.outputs),
        "bytes_in": part.bytes_in,
        "bytes_out": part.bytes_out,
        "predicted_peak_bytes": part.predicted_peak_bytes,
    }


def partition(
    transform: Spec,
    src: Source,
    *,
    workers: int,
    part_size: int | str | None = None,
    shard_size: int | str | None = None,
    budget: int | str | None = None,
) -> Partition:
    """The partitioned plan of converting `src` with `transform` for `workers` machines.

    `part_size` (bytes written per part) defaults to `shard_size`, else to a size giving
    `PARTS_PER_WORKER` parts per worker. `budget` is per worker. No tensor data is read; a
    target's output is checked as `plan` checks it.
    """
    with collection_paused(), opened(src) as source:
        resolved = resolve_spec(transform, source, src)
        traced = trace_transform(resolved.fn, source)
        check_target_output(resolved, output_infos(traced))  # what convert would refuse
        return build_partition(
            traced,
            source,
            spec=resolved.name,
            workers=workers,
            part_size=size_or_none(part_size, "part_size"),
            shard_size=size_or_none(shard_size, "shard_size"),
            budget=size_or_none(given_budget(budget), "budget"),
        )


def build_partition(
    traced: IRModule,
    source: CheckpointSource,
    *,
    spec: str,
    workers: int,
    part_size: int | None = None,
    shard_size: int | None = None,
    budget: int | None = None,
    compiled: dict[Hashable, Template] | None = None,
) -> Partition:
    """The partition of a traced module (see `partition`); `compiled` keeps the plans compiled
    per unit signature across calls on the same module and budget."""
    check_workers(workers)
    with collection_paused():
        return _partition_of(traced, source, spec, workers, part_size, shard_size, budget, compiled)


def _partition_of(
    traced: IRModule,
    source: CheckpointSource,
    spec: str,
    workers: int,
    part_size: int | None,
    shard_size: int | None,
    budget: int | None,
    compiled: dict[Hashable, Template] | None,
) -> Partition:
    """`build_partition`, with the collector paused."""
    outputs = output_infos(traced)
    names = names_of(function_of(traced), "input_names")
    inputs = tuple(source.info(name) for name in names)
    size = _part_size(part_size, shard_size, outputs, workers)
    units = tuple(find_units(traced, inputs, size))
    templates = _templates(
        traced, source, spec, units, budget, {} if compiled is None else compiled
    )
    parts = _cut(units, size, outputs, inputs, templates)
    return Partition(
        spec,
        str(getattr(source, "path", type(source).__name__)),
        traced,
        units,
        parts,
        size,
        budget,
        workers,
        inputs,
        outputs,
        templates,
    )


def _part_size(
    part_size: int | None, shard_size: int | None, outputs: Sequence[TensorInfo], workers: int
) -> int:
    """The bytes a part writes: as given, else one output shard, else an even share."""
    for name, value in (("part_size", part_size), ("shard_size", shard_size)):
        if value is not None and value <= 0:
            raise ConvertError(f"{name}: expected a positive size, got {value}")
    total = total_bytes(outputs)
    return part_size or shard_size or max(math.ceil(total / (workers * PARTS_PER_WORKER)), 1)


def _templates(
    traced: IRModule,
    source: CheckpointSource,
    spec: str,
    units: Sequence[Unit],
    budget: int | None,
    templates: dict[Hashable, Template],
) -> dict[Hashable, Template]:
    """One compiled plan per unit signature, made for the first unit that has it."""
    for unit in units:
        if unit.signature not in templates:
            plan = build_plan(unit_module(traced, unit), source, spec=spec, budget=budget)
            templates[unit.signature] = Template(plan, unit)
    return templates


def _cut(
    units: Sequence[Unit],
    size: int,
    outputs: Sequence[TensorInfo],
    inputs: Sequence[TensorInfo],
    templates: dict[Hashable, Template],
) -> tuple[Part, ...]:
    """Units in output order, cut into parts of about equal output bytes near `size`."""
    written = [sum(outputs[o].nbytes for o in unit.outputs) for unit in units]
    total = sum(written)
    count = max(math.ceil(total / size), 1) if total else 1
    target = total / count if total else math.inf
    groups: list[list[int]] = [[]]
    done = 0
    for index, nbytes in enumerate(written):
        groups[-1].append(index)
        done += nbytes
        if done >= target * len(groups) and index + 1 < len(units):
            groups.append([])
    parts = [_part(i, group, units, outputs, inputs, templates) for i, group in enumerate(groups)]
    return tuple(part for part in parts if part.outputs)


def _part(
    index: int,
    group: Sequence[int],
    units: Sequence[Unit],
    outputs: Sequence[TensorInfo],
    inputs: Sequence[TensorInfo],
    templates: dict[Hashable, Template],
) -> Part:
    """Part `index` of the units in `group`; its peak is its largest unit's."""
    peaks = [(templates[units[u].signature].plan.predicted_peak_bytes, u) for u in group]
    peak, at = max(peaks, default=(0, -1))
    return Part(
        index=index,
        units=tuple(group),
        outputs=tuple(outputs[o] for u in group for o in units[u].outputs),
        inputs=tuple(inputs[i] for u in group for i in units[u].inputs),
        predicted_peak_bytes=peak,
        peak_output=outputs[units[at].outputs[0]].name if at >= 0 else "",
    )


def output_order(module: IRModule) -> tuple[str, ...]:
    """The outputs of a lazy module in the order an in-order run finishes them (an output
    written in blocks of rows is finished by its last block)."""
    func = function_of(module)
    names = names_of(func, "output_names")
    order: dict[str, None] = {}
    for binding in func.bindings():
        call = binding.value
        if not (isinstance(call, Call) and isinstance(call.op, ExternFunc)):
            continue
        index = call.args[0] if call.op.global_symbol in ("set_item", SET_ROWS) else None
        if isinstance(index, PrimValue) and isinstance(index.value, IntImm):
            order.pop(names[index.value.value], None)
            order[names[index.value.value]] = None
    return tuple(order)


__all__ = [
    "Part",
    "Partition",
    "Template",
    "UnitRun",
    "build_partition",
    "partition",
]
