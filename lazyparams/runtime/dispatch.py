"""Which bindings may start now: the decisions of a parallel run within a byte budget.

`Dispatcher` is told each completion and answers with the bindings to start, so its decisions
depend only on the order of completions; `simulate` replays it under made-up durations. No
schedule it makes exceeds the budget or stalls. Imports `analysis` and `errors`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from lazyparams.analysis.parallel_model import Ledger, ParallelModel, Released
from lazyparams.errors import BudgetError, RuntimeExecError

WINDOW = 256
"""How many bindings past the first one not yet started the dispatcher looks at: how far it
may run ahead of program order (a window bounds the work of each decision)."""


class Dispatcher:
    """Decides which bindings of `model` start, given the completions it is told of.

    `start()` returns the bindings to start now (marking them started); `complete(i)` reports
    one finished and returns what it released. `held` and `peak` are the ledger's bytes now and
    at most so far.

    A binding starts when the bindings it waits for have completed, a worker is free and the
    budget allows: the bytes held plus its own stay within it, and so does every step that the
    program still has to take in order before it (its `timeline` entry, plus the buffers of
    bindings started ahead of their turn). So once the workers are idle, the next binding in
    program order can always start: no schedule stalls, none exceeds the budget, and with one
    worker the bindings run in program order.
    """

    def __init__(
        self, model: ParallelModel, budget: int, workers: int, *, window: int = WINDOW
    ) -> None:
        if model.peak_bytes > budget:
            raise BudgetError(
                f"memory budget of {budget} bytes is too small for the bindings run in order; "
                f"expected at least {model.peak_bytes} bytes, got {budget}"
            )
        if workers < 1 or window < 1:
            raise RuntimeExecError(f"expected workers and window >= 1, got {workers}, {window}")
        self.model, self.budget, self.workers, self.window = model, budget, workers, window
        self.ledger = Ledger(model)
        self.released_at_start = self.ledger.drop_dead_params()
        self.running: set[int] = set()
        self.frontier = 0  # the first binding not yet started
        self.completed = 0
        self.peak = self.ledger.held
        self._started = [False] * len(model)
        self._waiting = [len(d) for d in model.deps]
        self._dependents: list[list[int]] = [[] for _ in range(len(model))]
        for index, deps in enumerate(model.deps):
            for dep in deps:
                self._dependents[dep].append(index)
        # _over[j]: bytes step j would hold if the rest ran in order from here: its timeline
        # entry plus the live buffers of bindings after j that started ahead of their turn.
        self._over = list(model.timeline)
        self._ahead: dict[int, int] = {}  # buffer -> its binding, started ahead of its turn

    @property
    def held(self) -> int:
        return self.ledger.held

    @property
    def finished(self) -> bool:
        return self.completed == len(self.model)

    def start(self) -> list[int]:
        """The bindings to start now, in the order chosen (lowest index first)."""
        chosen: list[int] = []
        while len(self.running) < self.workers:
            index = self._candidate()
            if index is None:
                break
            self._start(index)
            chosen.append(index)
        return chosen

    def complete(self, index: int) -> Released:
        """Binding `index` completed; returns the vars to drop and the buffers released."""
        if index not in self.running:
            raise RuntimeExecError(f"binding {index}: expected a running binding, got another")
        self.running.remove(index)
        self.completed += 1
        released = self.ledger.complete(index)
        for buffer in released.buffers:
            owner = self._ahead.pop(buffer, None)
            if owner is not None:
                self._add_ahead(owner, -self.model.sizes[buffer])
        for dependent in self._dependents[index]:
            self._waiting[dependent] -= 1
        return released

    # Choosing ------------------------------------------------------------------------------

    def _candidate(self) -> int | None:
        """The first ready binding in the window that the budget admits, if any."""
        model = self.model
        if any(model.alone[i] for i in self.running):
            return None
        before = -1  # the most bytes any step between the frontier and the candidate needs
        for index in range(self.frontier, min(len(model), self.frontier + self.window)):
            ready = not self._started[index] and self._waiting[index] == 0
            if ready and self._admits(index, before):
                return index
            before = max(before, self._over[index])
        return None

    def _admits(self, index: int, before: int) -> bool:
        idle_turn = index == self.frontier and not self.running
        if self.model.alone[index] or idle_turn:
            return idle_turn  # the next binding in order always fits once the workers idle
        need = self.model.created_bytes[index]
        return self.held + need <= self.budget and before + need <= self.budget

    def _start(self, index: int) -> None:
        self._started[index] = True
        self.running.add(index)
        self.ledger.start(index)
        self.peak = max(self.peak, self.ledger.held)
        if index > self.frontier:
            for buffer in self.model.creates[index]:
                self._ahead[buffer] = index
            self._add_ahead(index, self.model.created_bytes[index])
        while self.frontier < len(self.model) and self._started[self.frontier]:
            self.frontier += 1

    def _add_ahead(self, owner: int, nbytes: int) -> None:
        """Steps from the frontier up to `owner` now also hold `nbytes` more (or fewer)."""
        for step in range(self.frontier, owner):
            self._over[step] += nbytes


# Simulation ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Simulation:
    """One simulated run: its events in order, the makespan and the peak bytes held.

    Each event is `("start" | "done", binding, bytes held just after it)`.
    """

    events: list[tuple[str, int, int]] = field(default_factory=list)
    makespan: float = 0.0
    peak: int = 0

    @property
    def starts(self) -> list[int]:
        """The bindings in the order they started."""
        return [index for kind, index, _ in self.events if kind == "start"]


def simulate(
    model: ParallelModel,
    budget: int,
    workers: int,
    duration: Callable[[int], float],
    *,
    window: int = WINDOW,
) -> Simulation:
    """Run the dispatcher on `model` as if binding i took `duration(i)` seconds.

    Completions are reported in order of finishing time (ties: lower binding first). Raises
    `RuntimeExecError` if the dispatcher ever stalls with work left.
    """
    dispatcher = Dispatcher(model, budget, workers, window=window)
    sim, now = Simulation(), 0.0
    running: list[tuple[float, int]] = []
    while not dispatcher.finished:
        for index in dispatcher.start():
            sim.events.append(("start", index, dispatcher.held))
            heapq.heappush(running, (now + duration(index), index))
        if not running:
            raise RuntimeExecError(
                f"the dispatcher stalled at binding {dispatcher.frontier} with nothing running"
            )
        now, index = heapq.heappop(running)
        dispatcher.complete(index)
        sim.events.append(("done", index, dispatcher.held))
    sim.makespan, sim.peak = now, dispatcher.peak
    return sim
