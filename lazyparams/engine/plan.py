"""`plan(transform, src)`: what a conversion will read, write and hold, before any data is read.

A plan traces the transform against the source's header, lowers it with the standard pipeline
and predicts the lazy function's peak memory next to the eager one; a target SPEC's output
(metadata, tokenizer, storable dtypes) is checked as `convert` checks it. Imports `analysis`, `io`,
`ir` and the engine's own modules.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lazyparams.analysis.memory import (
    MemoryProfile,
    check_budget,
    estimate_peak_memory,
    weight_struct_info,
)
from lazyparams.engine.binding_names import binding_tensors, name_tensors, with_tensor
from lazyparams.engine.chunking import fit_budget, row_outputs
from lazyparams.engine.compile import (
    FUNC,
    function_of,
    lower,
    names_of,
    output_infos,
    select_outputs,
    trace_transform,
    used_inputs,
)
from lazyparams.engine.format_choice import check_storable
from lazyparams.engine.memory_limit import BudgetChoice, choose_budget
from lazyparams.engine.specs import ResolvedSpec, resolve_spec
from lazyparams.errors import BudgetError, CheckpointError, ConvertError
from lazyparams.frontend.tracing import collection_paused
from lazyparams.io import CheckpointSource, TensorInfo, open_source
from lazyparams.io.partial import read_buffer_bytes
from lazyparams.ir import Function, IRModule, StructInfo
from lazyparams.transform.chunk_rows import GET_COLS, GET_ROWS, SET_ROWS

if TYPE_CHECKING:
    from lazyparams.analysis.parallel_model import ParallelModel

Spec = str | os.PathLike[str] | Callable[..., Any] | IRModule
Source = str | os.PathLike[str] | CheckpointSource
BLOCK_IO = (GET_ROWS, GET_COLS, SET_ROWS)
"""The externs through which the lazy function reads and writes blocks of rows: with the
parallel model's `REORDERABLE` (get_item, set_item), calls of distinct ones, which workers may
run in any order and at once."""


def total_bytes(infos: Iterable[TensorInfo]) -> int:
    """The bytes of all `infos` together."""
    return sum(info.nbytes for info in infos)


class ReadsWrites:
    """`bytes_in` and `bytes_out` of a record listing the tensors it reads and writes."""

    __slots__ = ()
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]

    @property
    def bytes_in(self) -> int:
        """Bytes read from the source: each listed input once."""
        return total_bytes(self.inputs)

    @property
    def bytes_out(self) -> int:
        """Bytes written to the destination."""
        return total_bytes(self.outputs)


@dataclass(frozen=True, slots=True)
class Plan(ReadsWrites):
    """A compiled conversion: the lazy module, what it reads and writes, and its memory.

    `predicted_peak_bytes` is the lazy function's peak as the VM meters it; with `workers` > 1
    it is the bound the workers run within (`worker_budget_bytes`), which they never exceed.
    """

    spec: str
    source: str
    module: IRModule
    """The lazy module the VM runs: lowered, and in blocks of rows where the budget needs it."""
    traced: IRModule
    """The transform as traced against the source's header, with only the outputs asked for,
    before lowering (`check_budget` reads the weights' struct info from it)."""
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    source_tensors: int
    profile: MemoryProfile
    eager_peak_bytes: int
    budget: int | None = None
    workers: int = 1
    parallel: ParallelModel | None = field(default=None, repr=False, compare=False)
    """The facts a parallel run plans with (`workers` > 1 only)."""
    target: tuple[tuple[str, str], ...] = ()
    """What a target SPEC (such as `gguf`) says of the output: architecture, types."""
    read_buffer_bytes: int = 0
    """What the source's loads hold beside the tensors they return (a compressed source's
    inflating buffers), once per worker; counted in the peak and taken off the budget."""
    budget_choice: BudgetChoice | None = None
    """Where the budget comes from (given, the default, turned off); None: as given."""

    @property
    def function(self) -> Function:
        """The lazy transform function the VM runs."""
        return function_of(self.module)

    @property
    def worker_budget_bytes(self) -> int | None:
        """The bytes `workers` > 1 may hold at once: the budget, or without one `workers` times
        the in-order peak. None when the run is in order: one worker, or a budget that holds
        the in-order run only as the VM meters it."""
        if self.parallel is None:
            return None
        if self.budget is None:
            from lazyparams.runtime.parallel import default_budget

            return default_budget(self.parallel, self.workers)
        room = self.budget - self.read_buffer_bytes
        if self.parallel.peak_bytes > room:
            return None
        if self.budget_is_default:  # a ceiling, not room the user granted the workers
            from lazyparams.runtime.parallel import default_budget

            return min(room, default_budget(self.parallel, self.workers))
        return room

    @property
    def budget_is_default(self) -> bool:
        """Whether the budget is the default, taken from the memory the process can use."""
        return self.budget_choice is not None and self.budget_choice.origin == "default"

    @property
    def in_flight_bytes(self) -> int:
        """Bytes the workers may hold beyond the in-order peak, to run steps ahead of order."""
        room = self.worker_budget_bytes
        return 0 if room is None else max(room - self.profile.peak_bytes, 0)

    @property
    def predicted_peak_bytes(self) -> int:
        """The peak this plan holds at once, in bytes (see the class docstring), with the
        source's read buffers."""
        return self.profile.peak_bytes + self.in_flight_bytes + self.read_buffer_bytes

    @property
    def peak_binding(self) -> str:
        """The binding of the lazy function where the peak happens."""
        return self.profile.peak_binding

    @property
    def peak_tensor(self) -> str | None:
        """The tensor the peak binding belongs to (`output 'NAME'` or `input 'NAME'`), or None
        where the peak is at the start or at a binding no tensor owns."""
        return binding_tensors(self.function).get(self.peak_binding)

    def binding_label(self, binding: str) -> str:
        """`binding` with the tensor it belongs to, as messages name it."""
        return with_tensor(binding, binding_tensors(self.function))

    @property
    def chunked_outputs(self) -> tuple[str, ...]:
        """The outputs computed and written in blocks of rows, to fit the budget."""
        return row_outputs(self.module)

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
        """Raise BudgetError, naming the binding (with its tensor) and the minimum, if the
        budget cannot hold.

        Workers never need more than the in-order run: they run within the budget itself.
        """
        if self.budget is None:
            return
        weights = weight_struct_info(function_of(self.traced))
        if self.read_buffer_bytes > self.budget:
            raise BudgetError(
                f"the source's read buffers alone need {self.read_buffer_bytes} bytes, over the "
                f"budget of {self.budget}{self._default_note()}"
            )
        room = self.budget - self.read_buffer_bytes
        try:
            check_budget(self.function, room, inputs=weights)
        except BudgetError as err:
            message = name_tensors(str(err), binding_tensors(self.function))
            raise BudgetError(message + self._default_note()) from None

    def _default_note(self) -> str:
        """What a refusal adds when the budget is the default: where it came from, and how
        to give another."""
        if not self.budget_is_default or self.budget_choice is None:
            return ""
        return (
            f"; the budget is the default ({self.budget_choice.note}): give a --budget "
            "(budget=) the machine can hold, or --budget none to run without one"
        )

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
            "peak_tensor": self.peak_tensor,
            "eager_peak_bytes": self.eager_peak_bytes,
            "budget": self.budget,
            "budget_source": self._budget_source(),
            "fits": self.fits,
            "workers": self.workers,
            "worker_budget": self.worker_budget_bytes,
            "chunked_outputs": list(self.chunked_outputs),
            "target": dict(self.target),
        }

    def _budget_source(self) -> dict[str, object] | None:
        """Where the budget comes from, for reports: None without a budget or a choice."""
        if self.budget_choice is not None:
            return self.budget_choice.summary()
        return None if self.budget is None else {"origin": "given", "note": None}


def plan(
    transform: Spec,
    src: Source,
    *,
    budget: int | str | None = None,
    workers: int = 1,
    allow_outside_links: bool = False,
) -> Plan:
    """Trace `transform` against the header of `src`, lower it, and predict its memory.

    `transform` is a callable `transform(params) -> {name: tensor}`, a recipe expression
    (`fuse-qkv+cast:float16`) or the path of a `.py` file defining `transform`; `src` is a
    checkpoint path or an open source. `budget` (bytes, or a size such as `4GiB`) is recorded;
    `plan.fits` and `plan.budget_message` say whether it holds. Without one the plan takes the
    default (`memory_limit.default_budget`: the memory this process can use, less headroom);
    `"none"` turns it off. No tensor data is read.
    `allow_outside_links` lets a folder's files and an index's shards resolve (through
    symlinks, `..` or absolute names) outside the checkpoint folder.
    """
    choice = choose_budget(budget)
    with collection_paused(), opened(src, allow_outside_links) as source:
        resolved = resolve_spec(transform, source, src)
        traced = trace_transform(resolved.fn, source)
        the_plan = build_plan(
            traced, source, spec=resolved.name, budget=choice.nbytes, workers=workers
        )
        check_target_output(resolved, the_plan.outputs)
        return replace(the_plan, target=resolved.describe(the_plan.outputs), budget_choice=choice)


def check_target_output(resolved: ResolvedSpec, outputs: Sequence[TensorInfo]) -> None:
    """Run the checks `convert` runs on a target's output before reading data, whatever the
    destination: its metadata (for `gguf`, config.json's hyperparameters and the tokenizer,
    with its pre-tokenizer) and what its format can store. A plan that succeeds is then not
    refused by `convert` for any of these reasons."""
    if resolved.output_format is None:
        return
    where = f"{resolved.name} output"
    check_storable(where, resolved.output_format, outputs, resolved.metadata(outputs) or None)


def build_plan(
    traced: IRModule,
    source: CheckpointSource,
    *,
    spec: str,
    keep: Collection[str] | None = None,
    budget: int | None = None,
    workers: int = 1,
    rows: bool = True,
) -> Plan:
    """The plan of a traced module, computing only the outputs in `keep` (default: all).

    Where the budget cannot hold a step, chains of row-separable steps go block by block
    (`chunking.fit_budget`), unless `rows` is False: a destination that takes no row blocks.
    """
    check_workers(workers)
    chosen = traced if keep is None else select_outputs(traced, keep)
    lazy = lower(chosen)
    eager = function_of(chosen)
    names = names_of(eager, "input_names")
    weights = weight_struct_info(eager)
    inputs = tuple(source.info(names[i]) for i in used_inputs(chosen))
    buffers = read_buffer_bytes(source, [info.name for info in inputs]) * workers
    if budget is not None and rows:
        lazy = fit_budget(lazy, weights, max(budget - buffers, 0))
    return Plan(
        spec=spec,
        source=source_name(source),
        module=lazy,
        traced=chosen,
        inputs=inputs,
        outputs=output_infos(chosen),
        source_tensors=len(names),
        profile=estimate_peak_memory(function_of(lazy), inputs=weights),
        eager_peak_bytes=estimate_peak_memory(eager).peak_bytes,
        budget=budget,
        workers=workers,
        parallel=_parallel_model(lazy, weights, workers),
        read_buffer_bytes=buffers,
    )


def _parallel_model(
    lazy: IRModule, weights: tuple[StructInfo, ...], workers: int
) -> ParallelModel | None:
    """What `workers` > 1 plan with (None for one worker)."""
    if workers == 1:
        return None
    # the parallel model and the runtime, for workers only
    from lazyparams.analysis.parallel_model import REORDERABLE
    from lazyparams.runtime.parallel import parallel_model_of

    reorderable = (*REORDERABLE, *BLOCK_IO)
    return parallel_model_of(lazy, FUNC, inputs=weights, reorderable=reorderable)


def check_workers(workers: object) -> None:
    """Refuse a worker count that is not a positive int."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConvertError(f"workers: expected a positive int, got {workers!r}")


def source_name(source: CheckpointSource) -> str:
    """How reports name a source: its path, or its type."""
    return str(getattr(source, "path", type(source).__name__))


@contextlib.contextmanager
def opened(src: Source, allow_outside_links: bool = False) -> Iterator[CheckpointSource]:
    """`src` as a source: opened (and closed after) when it is a path, else as given.

    `allow_outside_links` is passed to `open_source`: files may resolve outside the folder."""
    if all(callable(getattr(src, m, None)) for m in ("names", "info", "load")):
        yield _holding_tensors(src)  # type: ignore[arg-type]
        return
    if not isinstance(src, str | os.PathLike):
        raise ConvertError(f"expected a checkpoint path or source, got {type(src).__name__}")
    with open_source(src, allow_outside_links) as source:
        yield _holding_tensors(source)


def _holding_tensors(source: CheckpointSource) -> CheckpointSource:
    """`source`, refused when it holds no tensor: an empty checkpoint is the checkpoint's fault,
    not that of the SPEC that then returns nothing."""
    if not source.names():
        raise CheckpointError(
            f"{source_name(source)}: the checkpoint holds no tensors; expected at least one"
        )
    return source


__all__ = ["Plan", "build_plan", "opened", "plan"]
