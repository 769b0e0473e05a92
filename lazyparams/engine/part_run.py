"""Running one part of a partitioned plan in this process: each unit's lazy function in turn.

A unit runs the plan compiled for its signature through views that rename that plan's tensors
to the unit's own, so loads come from the right inputs and writes go to the right outputs. The
part's peak is the largest unit's, as every unit frees all it holds before the next starts.
Imports `runtime`, `io` and the engine's own modules.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lazyparams.engine.chunking import row_externs
from lazyparams.engine.compile import FUNC, function_of, names_of
from lazyparams.engine.output import Output
from lazyparams.engine.partition import Part, Partition, UnitRun
from lazyparams.engine.progress import Counter
from lazyparams.engine.resident import PeakResident, release_freed_memory_promptly
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.io.partial import load_cols, load_rows
from lazyparams.runtime import VirtualMachine


@dataclass(frozen=True, slots=True)
class PartStats:
    """What running a part did: tensors and bytes moved, and the memory it held."""

    part: int
    tensors_read: int
    bytes_read: int
    tensors_written: int
    bytes_written: int
    measured_peak_bytes: int
    peak_rss_bytes: int | None


class RenamedSource:
    """A source seen under other names: `names[a] = b` loads tensor `b` when `a` is asked for."""

    def __init__(self, source: CheckpointSource, names: dict[str, str]) -> None:
        self.source, self.renames = source, names

    def names(self) -> list[str]:
        return list(self.renames)

    def info(self, name: str) -> TensorInfo:
        return self.source.info(self.renames[name])

    def load(self, name: str) -> Any:
        return self.source.load(self.renames[name])

    def load_rows(self, name: str, start: int, stop: int) -> Any:
        return load_rows(self.source, self.renames[name], start, stop)

    def load_cols(self, name: str, start: int, stop: int) -> Any:
        return load_cols(self.source, self.renames[name], start, stop)


class RenamedOutput:
    """An output seen under other names: writes of `a` go to `names[a]` of `output`."""

    def __init__(self, output: Output, names: dict[str, str]) -> None:
        self.output, self.renames = output, names
        self.files = output.files

    def write(self, name: str, array: Any) -> None:
        self.output.write(self.renames[name], array)

    def write_rows(self, name: str, start: int, block: Any) -> None:
        self.output.write_rows(self.renames[name], start, block)

    def finalize(self) -> None:
        """Nothing: the output is finished by its owner."""

    def abort(self) -> None:
        """Nothing: the output is discarded by its owner."""

    def suspend(self) -> None:
        """Nothing: the output is kept by its owner."""


def run_part(
    partition: Partition,
    part: Part,
    source: CheckpointSource,
    output: Output,
    counter: Counter | None = None,
) -> PartStats:
    """Run every unit of `part`, reading `source` and writing `output`; the memory it held."""
    counter = counter or Counter()
    release_freed_memory_promptly()
    gc.collect()  # garbage of planning must not be freed inside the measured window
    peak = 0
    with PeakResident() as resident:
        for unit in partition.unit_runs(part):
            peak = max(peak, _run_unit(unit, source, output, counter))
    return PartStats(
        part.index,
        counter.tensors_read,
        counter.bytes_read,
        counter.tensors_written,
        counter.bytes_written,
        peak,
        resident.peak_bytes,
    )


def _run_unit(unit: UnitRun, source: CheckpointSource, output: Output, counter: Counter) -> int:
    """Run one unit's lazy function in order; returns the bytes the VM held at its peak."""
    plan = unit.plan
    viewed = RenamedSource(source, unit.inputs)
    written = RenamedOutput(output, unit.outputs)
    func = function_of(plan.module)
    inputs, outputs = names_of(func, "input_names"), names_of(func, "output_names")
    loading = threading.Lock()

    def get_item(index: int) -> Any:
        array = viewed.load(inputs[int(index)])
        counter.loaded(inputs[int(index)], int(array.nbytes))
        return array

    def set_item(index: int, value: Any) -> None:
        written.write(outputs[int(index)], value)
        counter.wrote(outputs[int(index)], int(value.nbytes))

    externs: dict[str, Callable[..., Any]] = dict(plan.module.attrs.get("numpy_kernels", {}))
    externs.update(get_item=get_item, set_item=set_item)
    externs.update(row_externs(plan.module, plan.outputs, viewed, written, counter, loading))  # type: ignore[arg-type]
    vm = VirtualMachine(plan.module, externs)
    vm[FUNC]()
    return int(vm.stats.peak_bytes)


__all__ = ["PartStats", "RenamedOutput", "RenamedSource", "run_part"]
