"""Running a Relax function's independent bindings at the same time, within a byte budget.

`ParallelRunner` runs a function on N threads (numpy releases the GIL in copies, casts and reads)
as the `Dispatcher` allows; each value is held until the dispatcher's ledger drops it, so the
bytes held never exceed the budget, and the kernels' buffer pool keeps freed outputs for reuse
within the peak the run reached. Imports `ir`, `analysis` and the runtime's own modules.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from lazyparams.analysis.memory_model import is_kill
from lazyparams.analysis.parallel_model import (
    REORDERABLE,
    ParallelModel,
    Released,
    parallel_model,
)
from lazyparams.errors import RuntimeExecError
from lazyparams.ir import Call, Function, IRModule, StructInfo
from lazyparams.runtime.dispatch import WINDOW, Dispatcher
from lazyparams.runtime.frame import Frame
from lazyparams.runtime.memory import MemoryStats, TimelineEntry
from lazyparams.runtime.pool import BUFFERS
from lazyparams.runtime.vm import VirtualMachine

_Done = tuple[int, Any, BaseException | None]


def default_budget(model: ParallelModel, workers: int) -> int:
    """The budget of a parallel run given none: `workers` times the in-order peak, room for each
    worker to hold a step as large as the largest. It depends on the largest steps of the
    program, never on how many steps it has (so not on the number of layers)."""
    return workers * model.peak_bytes


def parallel_model_of(
    mod: IRModule,
    name: str,
    sizes: Mapping[str, int] | None = None,
    *,
    inputs: Sequence[StructInfo] | None = None,
    reorderable: Sequence[str] = REORDERABLE,
) -> ParallelModel:
    """The parallel facts of Relax function `name` of `mod`; the traced numpy kernels the module
    carries are pure, so their calls are reorderable too. `sizes` and `inputs` as for
    `parallel_model`."""
    func = mod[name]
    if not isinstance(func, Function):
        raise RuntimeExecError(f"expected {name!r} to be a Relax function, got a PrimFunc")
    kernels = tuple(mod.attrs.get("numpy_kernels", {}))
    return parallel_model(func, sizes, inputs=inputs, reorderable=(*reorderable, *kernels))


class ParallelRunner:
    """Runs one Relax function of a VM's module with up to `workers` bindings at once.

    `budget` bounds the bytes the run holds at once, counted as the memory analysis counts them
    (default: `default_budget`); it must cover the in-order peak (`model.peak_bytes`). The
    `model` is `parallel_model_of(vm.mod, name, sizes, inputs=..., reorderable=...)` unless
    given: `sizes` gives symbolic dims their values, as for `estimate_peak_memory`. `stats`
    reports the latest run as `vm.stats` does, with the bytes held after each start.
    """

    def __init__(
        self,
        vm: VirtualMachine,
        name: str,
        *,
        workers: int,
        budget: int | None = None,
        sizes: Mapping[str, int] | None = None,
        inputs: Sequence[StructInfo] | None = None,
        reorderable: Sequence[str] = REORDERABLE,
        window: int = WINDOW,
        model: ParallelModel | None = None,
    ) -> None:
        bindings = vm.bindings(name)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise RuntimeExecError(f"workers: expected a positive int, got {workers!r}")
        self.vm, self.name, self.workers, self.window = vm, name, workers, window
        self.model = model or parallel_model_of(
            vm.mod, name, sizes, inputs=inputs, reorderable=reorderable
        )
        if len(self.model) != len(bindings):
            raise RuntimeExecError(
                f"function {name}: expected a parallel model of its {len(bindings)}"
                f" bindings, got one of {len(self.model)}"
            )
        self.budget = default_budget(self.model, workers) if budget is None else budget
        self.stats = MemoryStats()
        self._vars = tuple(b.var for b in bindings)
        self._kills = tuple(is_kill(b.value) for b in bindings)
        self._inline = tuple(
            kill or not isinstance(b.value, Call)
            for b, kill in zip(bindings, self._kills, strict=True)
        )

    def __call__(self, *args: Any) -> Any:
        """Run the function on `args`; returns its result as `vm[name](*args)` would."""
        dispatcher = Dispatcher(self.model, self.budget, self.workers, window=self.window)
        self.stats = MemoryStats()
        frame = self.vm.prepare(self.name, args)
        try:
            # freed outputs are reused within the peak reached, as in an in-order run: without
            # it every kernel of every worker faults fresh pages in
            with BUFFERS.watch(lambda: self._headroom(dispatcher)):
                self._drop(frame, dispatcher.released_at_start)
                self._record(dispatcher, -1, "(params)")
                self._run(frame, dispatcher)
            return self.vm.result(frame)
        finally:
            frame.values.clear()

    def _headroom(self, dispatcher: Dispatcher) -> int:
        """Bytes the buffer pool may keep: what the run could still hold without passing the
        peak it has reached (the ledger counts a started binding's output before it exists, so
        a block the pool hands it never adds to the bytes held)."""
        return max(self.stats.peak_bytes - dispatcher.held, 0)

    # The run -------------------------------------------------------------------------------

    def _run(self, frame: Frame, dispatcher: Dispatcher) -> None:
        """Run every binding on `workers` threads (this one among them); raise the first
        failure once the bindings still running have finished."""
        crew = _Crew(self, frame, dispatcher)
        crew.run(self.workers)
        if crew.failure is not None:
            raise crew.failure
        if not dispatcher.finished:
            raise RuntimeExecError(
                f"function {self.name}: the parallel run stalled at binding "
                f"{dispatcher.frontier} ({self.model.names[dispatcher.frontier]})"
            )

    def _work(self, frame: Frame, index: int) -> _Done:
        """Evaluate binding `index` and check its value; never raises (failures are returned)."""
        try:
            # a kill only releases, and the dispatcher's ledger already drops what it releases
            value = () if self._kills[index] else self.vm.run_binding(frame, index)
        except BaseException as err:  # reported like a result; the run raises it at its end
            return index, None, err
        return index, value, None

    def _finish(self, frame: Frame, dispatcher: Dispatcher, done: _Done) -> list[Any]:
        """Report a binding done: bind its value and drop what it released, whose values are
        returned (so the caller frees them where it likes). A failure is reported, not raised."""
        index, value, error = done
        if error is None:
            frame.values[self._vars[index]] = value
        return self._drop(frame, dispatcher.complete(index))

    def _drop(self, frame: Frame, released: Released) -> list[Any]:
        return [frame.values.pop(self.model.vars[var], None) for var in released.vars]

    def _record(self, dispatcher: Dispatcher, index: int, name: str) -> None:
        stats, held = self.stats, dispatcher.held
        stats.timeline.append(TimelineEntry(self.name, index, name, held))
        grew, stats.current_bytes = held > stats.current_bytes, held
        if held > stats.peak_bytes or stats.peak_binding is None:
            stats.peak_bytes, stats.peak_binding = held, name
            stats.peak_function, stats.peak_index = self.name, index
        if grew and BUFFERS.free_bytes:
            BUFFERS.fit()  # the run holds more: the pool keeps only what fits under the peak


class _Crew:
    """The threads of one run. A thread that finishes a binding reports it and asks the
    dispatcher what may start, under one lock, then takes the next binding itself: no thread
    sits between the workers. Values released by a report are freed outside the lock."""

    def __init__(self, runner: ParallelRunner, frame: Frame, dispatcher: Dispatcher) -> None:
        self.runner, self.frame, self.dispatcher = runner, frame, dispatcher
        self.failure: BaseException | None = None
        self._ready: deque[int] = deque()  # started, waiting for a thread
        self._taken = 0  # taken by a thread, not yet reported
        self._cv = threading.Condition()

    def run(self, workers: int) -> None:
        """Run until every binding is done, one fails, or nothing more can start."""
        with self._cv:
            self._dispatch()
        others = [
            threading.Thread(target=self._loop, name=f"lazyparams-worker-{i}", daemon=True)
            for i in range(1, workers)
        ]
        for thread in others:
            thread.start()
        try:
            self._loop()
        finally:
            for thread in others:
                thread.join()

    def _loop(self) -> None:
        done: _Done | None = None
        try:
            while True:
                with self._cv:
                    freed = [] if done is None else self._report(done)
                    done = None
                    index = self._next()
                freed.clear()  # the values the report released go here, outside the lock
                if index is None:
                    return
                done = self.runner._work(self.frame, index)
        except BaseException as err:  # stop the others, and let the caller raise it
            with self._cv:
                self.failure = self.failure or err
                self._cv.notify_all()

    def _report(self, done: _Done) -> list[Any]:
        self._taken -= 1
        if done[2] is not None and self.failure is None:
            self.failure = done[2]
        freed = self.runner._finish(self.frame, self.dispatcher, done)
        if self.failure is None:
            freed += self._dispatch()
        self._cv.notify_all()
        return freed

    def _dispatch(self) -> list[Any]:
        """Start what the dispatcher allows: bindings with no work run here and now (which may
        let more start), the others wait for a thread."""
        freed: list[Any] = []
        starts = self.dispatcher.start()
        while starts and self.failure is None:
            for index in starts:
                self.runner._record(self.dispatcher, index, self.runner.model.names[index])
                if not self.runner._inline[index]:
                    self._ready.append(index)
                    continue
                done = self.runner._work(self.frame, index)
                self.failure = self.failure or done[2]
                freed += self.runner._finish(self.frame, self.dispatcher, done)
            starts = self.dispatcher.start()
        return freed

    def _next(self) -> int | None:
        """The next binding to run, waiting while others run; None once the run is over."""
        while self.failure is None:
            if self._ready:
                self._taken += 1
                return self._ready.popleft()
            if self._taken == 0:  # finished, or nothing can start: the caller tells which
                return None
            self._cv.wait()
        return None
