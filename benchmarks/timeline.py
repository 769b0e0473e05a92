"""Memory over time for the benchmark plot: resident memory sampled in the child, loads timed.

`record(tool, out_json, src, dst, workers)` is a child target for `rss.measure`: it imports the
tool, takes its own baseline, runs one conversion while a thread samples the resident size every
`PERIOD` seconds, and writes the samples, the start time of every tensor load and (for
lazyparams) the plan's predicted timeline. `place` puts a predicted per-binding timeline on the
time axis by its loads; `plot` draws one panel per tool. Imports lazyparams, the baselines
(TVM's only for the `tvm` tool) and matplotlib (in `plot` only).
"""

from __future__ import annotations

import importlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from benchmarks import rss
from lazyparams import convert
from lazyparams.engine.process import tune_process_for_conversion
from lazyparams.engine.resident import current_rss
from lazyparams.io import CheckpointSource, open_source
from lazyparams.ir import Call, ExternFunc, Function

PERIOD = 0.002
RECIPE = "fuse-qkv+cast:float16"
MIB = 1 << 20


class Sampler:
    """`with Sampler() as s:` samples (seconds, resident bytes over the entry's) into `s.points`."""

    def __init__(self) -> None:
        self.points: list[tuple[float, int]] = []
        self.start = time.perf_counter()
        self._base = current_rss() or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self.start, self._base = time.perf_counter(), current_rss() or 0
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(PERIOD):
            self.points.append((self.now(), (current_rss() or 0) - self._base))

    def now(self) -> float:
        return time.perf_counter() - self.start

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.points.append((self.now(), (current_rss() or 0) - self._base))


class TimedSource:
    """A checkpoint source that notes when each `load` starts (seconds on `clock`)."""

    def __init__(self, source: CheckpointSource, clock: Callable[[], float]) -> None:
        self.source, self.clock = source, clock
        self.path = getattr(source, "path", "source")
        self.loads: list[float] = []

    def names(self) -> list[str]:
        return list(self.source.names())

    def info(self, name: str) -> Any:
        return self.source.info(name)

    def load(self, name: str) -> Any:
        self.loads.append(self.clock())
        return self.source.load(name)

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> TimedSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The child -------------------------------------------------------------------------------------


def record(tool: str, out_json: str, src: str, dst: str, workers: int = 1) -> None:
    """Run `tool` ("eager", "lazyparams" or "tvm") on `src` -> `dst`, sampled; write JSON."""
    module = importlib.import_module(_MODULES[tool])  # imports before the baseline is taken
    rss.reset_peak()
    result: dict[str, Any] = {"tool": tool, "workers": workers}
    with Sampler() as sampler:
        if tool == "lazyparams":
            result |= _record_lazyparams(src, dst, workers, sampler.now)
        else:
            result["loads"] = _with_timed_loads(module, tool, src, dst, sampler.now)
        result["end"] = sampler.now()
    result["samples"] = sampler.points
    Path(out_json).write_text(json.dumps(result))


_MODULES = {
    "eager": "benchmarks.baseline_eager",
    "lazyparams": "lazyparams",
    "tvm": "benchmarks.baseline_tvm",
}


def _record_lazyparams(src: str, dst: str, workers: int, clock: Callable[[], float]) -> Any:
    with open_source(src) as opened:
        source = TimedSource(opened, clock)
        target = Path(dst) / "model.safetensors"
        with tune_process_for_conversion():  # as the command runs it
            report = convert(RECIPE, source, target, workers=workers, progress=False)
    the_plan = report.plan
    return {
        "loads": source.loads,
        "predicted": list(the_plan.profile.timeline),
        "load_bindings": load_bindings(the_plan.function),
        "budget": the_plan.worker_budget_bytes,
    }


def _with_timed_loads(
    module: Any, tool: str, src: str, dst: str, clock: Callable[[], float]
) -> list[float]:
    """Run a baseline, noting when it loads: each shard (eager) or each tensor (TVM)."""
    loads: list[float] = []
    name = "load_file" if tool == "eager" else "open_source"
    original = getattr(module, name)

    def timed_load_file(*args: Any) -> Any:
        loads.append(clock())
        return original(*args)

    def timed_open_source(path: Any) -> Any:
        source = TimedSource(original(path), clock)
        source.loads = loads
        return source

    setattr(module, name, timed_load_file if tool == "eager" else timed_open_source)
    try:
        (module.run_eager if tool == "eager" else module.run_tvm)(src, dst)
    finally:
        setattr(module, name, original)
    return loads


def load_bindings(func: Function) -> list[int]:
    """Indices of the bindings of a lazy function that load an input, in order."""
    found = []
    for index, binding in enumerate(func.bindings()):
        value = binding.value
        callee = value.op if isinstance(value, Call) else None
        if isinstance(callee, ExternFunc) and callee.global_symbol == "get_item":
            found.append(index)
    return found


# The parent ------------------------------------------------------------------------------------


def place(
    timeline: Sequence[int], loads_at: Sequence[int], loads: Sequence[float], end: float
) -> list[tuple[float, int]]:
    """Times for a per-binding timeline: binding `loads_at[k]` at `loads[k]`, those between two
    loads evenly between their times, those after the last load evenly until `end`."""
    anchors = [*zip(loads_at, loads, strict=False), (len(timeline), end)]
    if anchors[0][0] > 0:
        anchors.insert(0, (0, anchors[0][1]))
    points = []
    for (first, t0), (last, t1) in itertools.pairwise(anchors):
        step = (t1 - t0) / max(last - first, 1)
        for index in range(first, min(last, len(timeline))):
            points.append((t0 + step * (index - first), timeline[index]))
    return points


def plot(panels: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """One panel per run: measured resident memory and, where known, the predicted timeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        t, rss_bytes = zip(*panel["samples"], strict=True)
        ax.plot(t, [b / MIB for b in rss_bytes], label="measured RSS over baseline", lw=0.8)
        if panel.get("predicted_points"):
            pt, pb = zip(*panel["predicted_points"], strict=True)
            ax.step(pt, [b / MIB for b in pb], where="post", ls="--", label="predicted", lw=0.8)
        if panel.get("budget"):
            ax.axhline(panel["budget"] / MIB, color="gray", ls=":", label="worker budget")
        ax.set_title(panel["label"], fontsize=10)
        ax.set_xlabel("seconds since the call began")
        ax.set_ylabel("MiB")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
