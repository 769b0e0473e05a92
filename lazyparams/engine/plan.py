"""`plan(transform, src)`: what a conversion will read, write and hold, before any data is read.

A plan traces the transform against the source's header, lowers it with the standard pipeline
and predicts the lazy function's peak memory next to the eager one. Imports `analysis`, `io`,
`ir` and the engine's own modules.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from lazyparams.analysis.memory import (
    MemoryProfile,
    check_budget,
    estimate_peak_memory,
    weight_struct_info,
)
from lazyparams.engine.compile import (
    function_of,
    lower,
    names_of,
    output_infos,
    select_outputs,
    trace_transform,
    used_inputs,
)
from lazyparams.engine.recipes import load_spec, spec_name
from lazyparams.engine.sizes import format_bytes, size_or_none
from lazyparams.errors import BudgetError, ConvertError
from lazyparams.io import CheckpointSource, TensorInfo, open_source
from lazyparams.ir import Function, IRModule

Spec = str | os.PathLike[str] | Callable[..., Any]
Source = str | os.PathLike[str] | CheckpointSource


@dataclass(frozen=True, slots=True)
class Plan:
    """A compiled conversion: the lazy module, what it reads and writes, and its memory.

    `predicted_peak_bytes` is the lazy function's peak as the VM meters it, plus, with
    `workers` > 1, the largest outputs that may still be in flight to the sink.
    """

    spec: str
    source: str
    module: IRModule
    traced: IRModule
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    source_tensors: int
    profile: MemoryProfile
    eager_peak_bytes: int
    budget: int | None = None
    workers: int = 1

    @property
    def function(self) -> Function:
        """The lazy transform function the VM runs."""
        return function_of(self.module)

    @property
    def in_flight_bytes(self) -> int:
        """Bytes of the `workers - 1` largest outputs, which background writes may hold."""
        sizes = sorted((info.nbytes for info in self.outputs), reverse=True)
        return sum(sizes[: self.workers - 1])

    @property
    def predicted_peak_bytes(self) -> int:
        """The peak this plan holds at once, in bytes (see the class docstring)."""
        return self.profile.peak_bytes + self.in_flight_bytes

    @property
    def peak_binding(self) -> str:
        """The binding of the lazy function where the peak happens."""
        return self.profile.peak_binding

    @property
    def bytes_in(self) -> int:
        """Bytes read from the source (each input the transform needs, once)."""
        return sum(info.nbytes for info in self.inputs)

    @property
    def bytes_out(self) -> int:
        """Bytes written to the destination."""
        return sum(info.nbytes for info in self.outputs)

    @property
    def fits(self) -> bool:
        """Whether the predicted peak holds within the budget (always, without one)."""
        return self.budget is None or self.predicted_peak_bytes <= self.budget

    @property
    def budget_message(self) -> str | None:
        """Why the budget cannot hold, or None when it does."""
        try:
            self.check_budget()
        except BudgetError as err:
            return str(err)
        return None

    def check_budget(self) -> None:
        """Raise BudgetError, naming the binding and the minimum, if the budget cannot hold."""
        if self.budget is None:
            return
        room = self.budget - self.in_flight_bytes
        flight = (
            f"with workers={self.workers}, up to {format_bytes(self.in_flight_bytes)} of outputs "
            "are in flight to the sink; "
        )
        if room < 0:
            raise BudgetError(
                f"memory budget of {format_bytes(self.budget)} is too small: {flight}expected "
                f"a budget of at least {self.predicted_peak_bytes} bytes "
                f"({format_bytes(self.predicted_peak_bytes)}), got {self.budget}"
            )
        try:
            weights = weight_struct_info(function_of(self.traced))
            check_budget(self.function, room, inputs=weights)
        except BudgetError as err:
            prefix = flight if self.workers > 1 else ""
            raise BudgetError(f"{prefix}{err}") from None

    def summary(self) -> dict[str, Any]:
        """The plan's numbers as plain data (for JSON reports)."""
        return {
            "spec": self.spec,
            "source": self.source,
            "inputs": len(self.inputs),
            "outputs": len(self.outputs),
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "predicted_peak_bytes": self.predicted_peak_bytes,
            "peak_binding": self.peak_binding,
            "eager_peak_bytes": self.eager_peak_bytes,
            "budget": self.budget,
            "fits": self.fits,
            "workers": self.workers,
        }


def plan(
    transform: Spec, src: Source, *, budget: int | str | None = None, workers: int = 1
) -> Plan:
    """Trace `transform` against the header of `src`, lower it, and predict its memory.

    `transform` is a callable `transform(params) -> {name: tensor}`, a recipe expression
    (`fuse-qkv+cast:float16`) or the path of a `.py` file defining `transform`; `src` is a
    checkpoint path or an open source. `budget` (bytes, or a size such as `4GiB`) is recorded;
    `plan.fits` and `plan.budget_message` say whether it holds. No tensor data is read.
    """
    fn = load_spec(transform)
    limit = size_or_none(budget, "budget")
    with opened(src) as source:
        traced = trace_transform(fn, source)
        return build_plan(traced, source, spec=spec_name(transform), budget=limit, workers=workers)


def build_plan(
    traced: IRModule,
    source: CheckpointSource,
    *,
    spec: str,
    keep: Collection[str] | None = None,
    budget: int | None = None,
    workers: int = 1,
) -> Plan:
    """The plan of a traced module, computing only the outputs in `keep` (default: all)."""
    check_workers(workers)
    chosen = traced if keep is None else select_outputs(traced, keep)
    lazy = lower(chosen)
    eager = function_of(chosen)
    names = names_of(eager, "input_names")
    return Plan(
        spec=spec,
        source=source_name(source),
        module=lazy,
        traced=chosen,
        inputs=tuple(source.info(names[i]) for i in used_inputs(chosen)),
        outputs=output_infos(chosen),
        source_tensors=len(names),
        profile=estimate_peak_memory(function_of(lazy), inputs=weight_struct_info(eager)),
        eager_peak_bytes=estimate_peak_memory(eager).peak_bytes,
        budget=budget,
        workers=workers,
    )


def check_workers(workers: object) -> None:
    """Refuse a worker count that is not a positive int."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConvertError(f"workers: expected a positive int, got {workers!r}")


def source_name(source: CheckpointSource) -> str:
    """How reports name a source: its path, or its type."""
    return str(getattr(source, "path", type(source).__name__))


@contextlib.contextmanager
def opened(src: Source) -> Iterator[CheckpointSource]:
    """`src` as a source: opened (and closed after) when it is a path, else as given."""
    if all(callable(getattr(src, m, None)) for m in ("names", "info", "load")):
        yield src  # type: ignore[misc]
        return
    if not isinstance(src, str | os.PathLike):
        raise ConvertError(f"expected a checkpoint path or source, got {type(src).__name__}")
    with open_source(src) as source:
        yield source


__all__ = ["Plan", "build_plan", "opened", "plan"]
