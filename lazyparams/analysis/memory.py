"""Peak memory of a Relax function, predicted binding by binding before any byte is read.

Counts loaded inputs, intermediates and outputs not yet handed off, as the VM meters them: each
buffer from the binding that creates it until its last holder is dead (see `memory_model`).
`check_budget` turns the prediction into a refusal that names the binding. Imports `ir` and
`analysis` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from lazyparams.analysis.liveness import PARAM
from lazyparams.analysis.memory_builder import buffer_model
from lazyparams.analysis.memory_model import BufferModel, Callees
from lazyparams.errors import BudgetError
from lazyparams.ir import Function, StructInfo, TupleStructInfo, Var, struct_info_of

# Profiles ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveValue:
    """One buffer live at some point: the var (and tuple field) that made it, and its bytes."""

    name: str
    nbytes: int

    def __str__(self) -> str:
        return f"{self.name} {format_bytes(self.nbytes)}"


@dataclass(frozen=True, slots=True)
class MemoryProfile:
    """Predicted memory of one run of a function, as the VM's meter will report it.

    `timeline[i]` is the bytes held while binding i runs: everything live before it plus what it
    creates (values whose last use it is are dropped right after it); `names[i]` is its var. A
    lazy prediction (`as_lazy`) may end with extra steps for inputs the result passes through.
    `start_bytes` is what the params hold before the first binding. The peak is the first
    largest of these; `peak_index` is -1 and `peak_binding` is `START` when it is the start.
    """

    peak_bytes: int
    peak_index: int
    peak_binding: str
    live_at_peak: tuple[LiveValue, ...]
    timeline: tuple[int, ...]
    names: tuple[str, ...]
    start_bytes: int

    def __str__(self) -> str:
        live = ", ".join(map(str, self.live_at_peak))
        where = "the start" if self.peak_index < 0 else f"binding {self.peak_binding}"
        return f"peak {format_bytes(self.peak_bytes)} at {where}: {live or 'nothing live'}"


START = "(params)"
"""`MemoryProfile.peak_binding` when the peak is the params, before any binding (as the VM)."""


def format_bytes(nbytes: int) -> str:
    """`nbytes` in the largest binary unit that keeps it at or above 1, e.g. `3.0 MiB`."""
    value, unit = float(nbytes), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"


def profile_of(model: BufferModel) -> MemoryProfile:
    """The timeline of a buffer model, run in the order of its bindings."""
    count = len(model.bindings)
    delta = [0] * (count + 1)
    for buffer, size in enumerate(model.sizes):
        first, last = _span(model, buffer)
        if max(first, 0) <= last:
            delta[max(first, 0)] += size
            delta[last + 1] -= size
    timeline, running = [], 0
    for index in range(count):
        running += delta[index]
        timeline.append(running)
    final = sum(s for b, s in enumerate(model.sizes) if model.end_of(b) >= count)
    timeline += [final + nbytes for _, nbytes in model.end_loads]
    names = tuple(b.var.name_hint for b in model.bindings) + tuple(n for n, _ in model.end_loads)
    start = sum(s for b, s in enumerate(model.sizes) if model.created_by[b] == PARAM)
    peak = max([start, *timeline])
    peak_index = -1 if start == peak else timeline.index(peak)
    return MemoryProfile(
        peak_bytes=peak,
        peak_index=peak_index,
        peak_binding=START if peak_index < 0 else names[peak_index],
        live_at_peak=_live_at(model, peak_index),
        timeline=tuple(timeline),
        names=names,
        start_bytes=start,
    )


def _span(model: BufferModel, buffer: int) -> tuple[int, int]:
    """First and last binding index holding `buffer` (first is `PARAM` for inputs)."""
    return model.created_by[buffer], min(model.end_of(buffer), len(model.bindings) - 1)


def _is_live(model: BufferModel, buffer: int, index: int) -> bool:
    """Whether `buffer` is held while step `index` runs (-1: at the start)."""
    first, last = _span(model, buffer)
    if index < 0:
        return first == PARAM
    if index >= len(model.bindings):
        return model.end_of(buffer) >= len(model.bindings)
    return max(first, 0) <= index <= last


def _live_at(model: BufferModel, index: int) -> tuple[LiveValue, ...]:
    """The buffers held while step `index` runs (-1: at the start), largest first."""
    live = [
        LiveValue(model.labels[b], size)
        for b, size in enumerate(model.sizes)
        if size and _is_live(model, b, index)
    ]
    if index >= len(model.bindings):
        live.append(LiveValue(*model.end_loads[index - len(model.bindings)]))
    return tuple(sorted(live, key=lambda v: -v.nbytes))


def estimate_peak_memory(
    func: Function,
    sizes: Mapping[str, int] | None = None,
    *,
    inputs: Sequence[StructInfo] | None = None,
    as_lazy: bool = False,
    callees: Callees | None = None,
) -> MemoryProfile:
    """Predict the bytes `func` holds during each binding when the VM runs it, and the peak.

    Eager functions hold their params from the start; a lazy function holds a loaded input
    from its `get_item` (or `fget_param`) call. Every value is dropped after its last use or
    at its `kill_object`, and stops counting once handed to `set_item` (or `fset_output`).
    Bytes are elements times `ir.dtype.itemsize`: int4 takes a byte per element, as ml_dtypes
    stores it. A call to another Relax function counts only its result.

    `sizes` gives symbolic dims (`{"n": 4096}`); a dim without a value raises
    `StructInfoError` naming it. `inputs` gives the struct info of every input, for loads typed
    `R.Object` that no `match_cast` refines (`weight_struct_info(eager_func)` gives them).
    `as_lazy` predicts an eager function as the standard pipeline will run it: each weight is
    loaded at its first read and each output handed off as soon as it is computed.
    `callees` names the load and hand-off calls (default `get_item`, `set_item`,
    `fset_output`).
    """
    model = buffer_model(func, sizes, as_lazy=as_lazy, inputs=inputs, callees=callees)
    return profile_of(model)


def lazy_kill_points(func: Function, sizes: Mapping[str, int] | None = None) -> dict[Var, int]:
    """The lazy model's frees: for each var of `func` the standard pipeline kills, the binding
    after which it does, as the peak prediction counts it (an If's branches left as written)."""
    model = buffer_model(func, sizes, as_lazy=True, default_dim=1, allow_if=True)
    defined = {binding.var: index for index, binding in enumerate(model.bindings)}
    return {var: max(group | {defined[var]}) for var, group in model.kill_groups.items()}


def weight_struct_info(func: Function) -> tuple[StructInfo, ...]:
    """The struct info of each weight of an eager transform function, by input index.

    Weights are the params after `num_input`: the fields of one tuple param, or the params.
    """
    weights = func.params[int(func.attrs.get("num_input", 0)) :]
    if len(weights) == 1 and isinstance(weights[0].struct_info, TupleStructInfo):
        return weights[0].struct_info.fields
    return tuple(struct_info_of(w) for w in weights)


class ProfileOptions(TypedDict, total=False):
    """`estimate_peak_memory`'s keyword arguments, which `check_budget` passes on."""

    inputs: Sequence[StructInfo] | None
    as_lazy: bool
    callees: Callees | None


def check_budget(
    func: Function,
    budget_bytes: int,
    sizes: Mapping[str, int] | None = None,
    **options: Unpack[ProfileOptions],
) -> MemoryProfile:
    """Return the profile of `func` if its peak fits `budget_bytes`, else raise `BudgetError`.

    The error names the first binding that would exceed the budget and what it needs, and the
    minimum budget the whole function needs (its peak). Other arguments as for
    `estimate_peak_memory`.
    """
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
        raise BudgetError(
            f"expected a budget of zero or more bytes as an int, got {budget_bytes!r}"
        )
    profile = estimate_peak_memory(func, sizes, **options)
    if profile.peak_bytes <= budget_bytes:
        return profile
    raise BudgetError(_over_budget_message(profile, budget_bytes))


def _over_budget_message(profile: MemoryProfile, budget: int) -> str:
    steps = [profile.start_bytes, *profile.timeline]
    first = next(i for i, held in enumerate(steps) if held > budget) - 1
    where = "the params, held from the start," if first < 0 else f"binding {profile.names[first]}"
    needs = steps[first + 1]
    peak_at = "the start" if profile.peak_index < 0 else f"binding {profile.peak_binding}"
    return (
        f"memory budget of {budget} bytes ({format_bytes(budget)}) is too small: {where} needs "
        f"{needs} bytes ({format_bytes(needs)}) live at once; expected a budget of at least "
        f"{profile.peak_bytes} bytes ({format_bytes(profile.peak_bytes)}, the peak, at "
        f"{peak_at}), got {budget}"
    )
