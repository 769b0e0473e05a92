"""Wall time and peak resident memory of one function call, each call in a fresh interpreter.

`measure(target, *args)` runs `target(*args)` in a new `python` process. The child imports the
target's module, then resets the kernel's peak-RSS mark and reads its baseline: RSS after imports
and before the work. The result is the peak over that baseline, and the wall time of the call
alone. Imports the standard library and lazyparams.errors.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from lazyparams.errors import LazyParamsError

ROOT = Path(__file__).resolve().parent.parent
_STATUS = Path("/proc/self/status")
_CHILD = "import sys; from benchmarks.rss import child_main; child_main(sys.argv[1])"


class Measurement(NamedTuple):
    """One call: seconds it took and its peak RSS over the baseline, in bytes."""

    wall_s: float
    peak_rss_bytes: int


def measure(
    target: str | Callable[..., Any], *args: Any, timeout: float | None = None
) -> Measurement:
    """Run `target(*args)` in a fresh interpreter and measure it.

    `target` is `"package.module:function"` or a module-level function (not a lambda or a
    function of `__main__`, which the child cannot import); `args` must pickle. The child's
    stdout and stderr pass through; a failing call raises LazyParamsError with the exit code.

    Peak method: on Linux, writing "5" to /proc/self/clear_refs resets VmHWM to the current RSS,
    so the imports' own transient peak does not hide a smaller one; peak = VmHWM after the call
    minus VmRSS before it. Elsewhere, getrusage's max RSS (no reset) minus the max before, which
    is a lower bound when the imports peaked higher than the call.
    """
    spec = _target_spec(target)
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.pickle"
        job.write_bytes(pickle.dumps((spec, args)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(_child_path())}
        done = subprocess.run([sys.executable, "-c", _CHILD, str(job)], env=env, timeout=timeout)
        if done.returncode != 0:
            raise LazyParamsError(f"measuring {spec}: expected exit code 0, got {done.returncode}")
        result = json.loads((Path(tmp) / "result.json").read_text())
    return Measurement(result["wall_s"], result["peak_rss_bytes"])


def _target_spec(target: str | Callable[..., Any]) -> str:
    """`module:qualname` of the target, checked to be importable by name."""
    if isinstance(target, str):
        if ":" not in target:
            raise LazyParamsError(f"expected a target 'module:function', got {target!r}")
        return target
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if module in (None, "__main__") or "<" in name:
        raise LazyParamsError(
            f"expected a function importable by name, got {target!r} (module {module!r})"
        )
    return f"{module}:{name}"


def _child_path() -> list[str]:
    """The child's PYTHONPATH: the repository root (for `benchmarks.*`), then the parent's."""
    inherited = os.environ.get("PYTHONPATH", "")
    return [str(ROOT), *(p for p in inherited.split(os.pathsep) if p)]


# -- the child -------------------------------------------------------------------------------------


def child_main(job_path: str) -> None:
    """Import the job's target, take the baseline, call it, write result.json beside the job."""
    job = Path(job_path)
    spec, args = pickle.loads(job.read_bytes())
    fn = _resolve(spec)
    baseline = reset_peak()
    start = time.perf_counter()
    fn(*args)
    wall = time.perf_counter() - start
    result = {"wall_s": wall, "peak_rss_bytes": max(0, peak_rss() - baseline)}
    (job.parent / "result.json").write_text(json.dumps(result))


def _resolve(spec: str) -> Callable[..., Any]:
    module_name, _, qualname = spec.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        value = getattr(value, part)
    if not callable(value):
        raise LazyParamsError(f"expected {spec} to be callable, got {type(value).__name__}")
    return value  # type: ignore[no-any-return]


def reset_peak() -> int:
    """Reset the peak-RSS mark to the current RSS if the OS allows; returns the baseline bytes."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return peak_rss()  # no reset: growth past the earlier peak is all that can be seen
    return _status_bytes("VmRSS")


def peak_rss() -> int:
    """The process's peak resident set size in bytes (since the last reset, where reset)."""
    if _STATUS.exists():
        return _status_bytes("VmHWM")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _status_bytes(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LazyParamsError(f"{_STATUS}: expected a {field} line, got none")
