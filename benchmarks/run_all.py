"""The benchmark suite in one command: every tool on every workload, side by side, as ratios.

    python -m benchmarks.run_all             # L = 8, 16, 32 and the real layout, 3 runs each
    python -m benchmarks.run_all --results   # and put the table into benchmarks/RESULTS.md

Workloads: the llama-like checkpoint of DESIGN.md (d=512, f=1376, float32, sharded) at each
`--layers`, and the real layout of `real_layout` (embeddings, norms, lm_head). Tools: eager
numpy (load all with safetensors, transform, save), lazyparams with 1 and 2 workers, and TVM's
lazy pipeline when apache-tvm is installed; all do `fuse-qkv+cast:float16` and must write the
same tensors, bit for bit (checked). Each run is a fresh interpreter (`rss.measure`): the wall
time of the call (compiling included) and the peak resident memory over the baseline taken after
imports. Runs alternate between tools, `--repeat` times; the table gives medians. Writes
`benchmarks/results/benchmarks.md` and `memory.png` (the largest llama-like workload, sampled).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import rss, timeline
from benchmarks.baseline_eager import differences, make_checkpoint
from benchmarks.real_layout import SHAPE
from benchmarks.real_layout import make_checkpoint as make_real_checkpoint
from benchmarks.workloads import FUNC_NAME, llama_like
from lazyparams import convert, plan
from lazyparams.analysis import estimate_peak_memory, weight_struct_info
from lazyparams.engine.process import tune_process_for_conversion
from lazyparams.ir import Function
from lazyparams.transform import LazyTransformParams

RECIPE = timeline.RECIPE
RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
MARKERS = ("<!-- benchmarks:begin -->", "<!-- benchmarks:end -->")
MIB = 1 << 20
REFERENCE = "lazyparams-2"
LAZYPARAMS = "benchmarks.run_all:run_lazyparams"


@dataclass(frozen=True, slots=True)
class Tool:
    """A way to convert: the child target per workload kind, and extra arguments."""

    key: str
    label: str
    targets: dict[str, str]
    args: tuple[Any, ...] = ()


TOOLS = (
    Tool(
        "eager",
        "eager numpy + safetensors",
        {
            "llama": "benchmarks.baseline_eager:run_eager",
            "real": "benchmarks.real_layout:run_eager",
        },
    ),
    Tool(
        "lazyparams-1", "lazyparams, 1 worker", dict.fromkeys(("llama", "real"), LAZYPARAMS), (1,)
    ),
    Tool(
        "lazyparams-2", "lazyparams, 2 workers", dict.fromkeys(("llama", "real"), LAZYPARAMS), (2,)
    ),
    Tool(
        "tvm",
        "TVM lazy pipeline",
        {"llama": "benchmarks.baseline_tvm:run_tvm", "real": "benchmarks.real_layout_tvm:run_tvm"},
    ),
)


@dataclass(slots=True)
class Workload:
    """One row group of the table: a checkpoint, its size, and every tool's runs on it."""

    name: str
    kind: str
    layers: int
    d: int = 512
    f: int = 1376
    weights: int = 0
    output_sizes: list[int] = field(default_factory=list)
    runs: dict[str, list[rss.Measurement]] = field(default_factory=dict)
    predicted: dict[str, int | None] = field(default_factory=dict)


def run_lazyparams(src: str, dst: str, workers: int) -> None:
    """The lazyparams child: convert `src` into `dst/model.safetensors` with `workers`."""
    with tune_process_for_conversion():  # as the command runs it
        convert(RECIPE, src, Path(dst) / "model.safetensors", workers=workers, progress=False)


# Running ---------------------------------------------------------------------------------------


def make_source(workload: Workload, folder: Path) -> Path:
    """Write the workload's float32 checkpoint into `folder`."""
    if workload.kind == "real":
        return make_real_checkpoint(folder)
    return make_checkpoint(folder, workload.layers, workload.d, workload.f, shards=4)


def measure_workload(
    workload: Workload, src: Path, tools: Sequence[Tool], repeat: int, tmp: Path
) -> None:
    """Run every tool `repeat` times on `src`, alternating; the first outputs are compared."""
    for run in range(repeat):
        order = [tools[(run + i) % len(tools)] for i in range(len(tools))]
        outputs = {}
        for tool in order:
            dst = tmp / f"out-{tool.key}"
            target = tool.targets[workload.kind]
            print(f"  {workload.name}: {tool.label} (run {run + 1}/{repeat})", flush=True)
            measured = rss.measure(target, str(src), str(dst), *tool.args)
            workload.runs.setdefault(tool.key, []).append(measured)
            outputs[tool.key] = dst
        if run == 0:
            _check_same_tensors(outputs)
        for dst in outputs.values():
            shutil.rmtree(dst)


def _check_same_tensors(outputs: dict[str, Path]) -> None:
    reference = outputs["eager"]
    for key, dst in outputs.items():
        found = differences(reference, dst)
        if found:
            raise SystemExit(f"{key} differs from eager numpy: {found[:3]}")


def predict(workload: Workload, src: Path, tools: Sequence[Tool]) -> None:
    """The peaks known before any data is read: lazyparams' plan for each worker count (the
    bound it runs within), everything at once for eager numpy (it keeps every input and output
    until it saves), and for TVM the same analysis of the seed-style lazy function (llama-like
    workloads, whose eager module is known)."""
    one, two = plan(RECIPE, src), plan(RECIPE, src, workers=2)
    workload.weights = one.bytes_in
    workload.output_sizes = [info.nbytes for info in one.outputs]
    workload.predicted = {
        "eager": one.bytes_in + one.bytes_out,
        "lazyparams-1": one.predicted_peak_bytes,
        "lazyparams-2": two.predicted_peak_bytes,
        "tvm": seed_lazy_profile(workload).peak_bytes if workload.kind == "llama" else None,
    }


def seed_lazy(workload: Workload) -> tuple[Function, Function]:
    """The llama-like eager function and its lazy form by the seed's pass alone (as TVM's)."""
    eager = llama_like(workload.layers, workload.d, workload.f)
    lazy, func = LazyTransformParams()(eager)[FUNC_NAME], eager[FUNC_NAME]
    assert isinstance(func, Function) and isinstance(lazy, Function)
    return func, lazy


def seed_lazy_profile(workload: Workload) -> Any:
    """The predicted memory of the seed-style lazy function (what TVM's pipeline runs)."""
    eager, lazy = seed_lazy(workload)
    return estimate_peak_memory(lazy, inputs=weight_struct_info(eager))


def sample_panels(
    workload: Workload, src: Path, tools: Sequence[Tool], tmp: Path
) -> list[dict[str, Any]]:
    """One sampled run per tool on `src`, with the predicted timeline placed on its time axis."""
    panels = []
    for tool in tools:
        out_json, dst = tmp / f"{tool.key}.json", tmp / f"sampled-{tool.key}"
        kind = tool.key.split("-")[0]
        workers = tool.args[0] if tool.args else 1
        print(f"  {workload.name}: {tool.label} (sampled)", flush=True)
        rss.measure(timeline.record, kind, str(out_json), str(src), str(dst), workers)
        shutil.rmtree(dst, ignore_errors=True)
        data = json.loads(out_json.read_text())
        data["label"] = f"{tool.label}, {workload.name}"
        data["predicted_points"] = _predicted_points(tool.key, workload, data)
        panels.append(data)
    return panels


def _predicted_points(key: str, workload: Workload, data: dict[str, Any]) -> list[Any]:
    loads, end = data["loads"], data["end"]
    if key == "lazyparams-1":
        return timeline.place(data["predicted"], data["load_bindings"], loads, end)
    eager, lazy = seed_lazy(workload)
    if key == "tvm" and loads:
        profile = estimate_peak_memory(lazy, inputs=weight_struct_info(eager))
        return timeline.place(profile.timeline, timeline.load_bindings(lazy), loads, end)
    if key == "eager" and loads:
        return _eager_points(workload, loads, end)
    return []


def _eager_points(workload: Workload, loads: Sequence[float], end: float) -> list[Any]:
    """Eager numpy holds the inputs as its shards arrive, then keeps each output until it saves
    them all: everything is in memory at once."""
    points = [(t, workload.weights * k // len(loads)) for k, t in enumerate(loads)]
    step = (end - loads[-1]) / max(len(workload.output_sizes), 1)
    made = itertools.accumulate(workload.output_sizes, initial=0)
    points += [(loads[-1] + step * k, workload.weights + b) for k, b in enumerate(made)]
    return points


# Reporting -------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(workloads: Sequence[Workload], tools: Sequence[Tool]) -> str:
    """The markdown table: per workload and tool, medians and ratios to lazyparams (2 workers)."""
    lines = [
        "| workload | tool | wall s, median [min-max] | wall ÷ lazyparams | peak RSS MiB | "
        "peak ÷ lazyparams | predicted peak MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload in workloads:
        ref = workload.runs[REFERENCE]
        ref_wall = _median([m.wall_s for m in ref])
        ref_peak = _median([m.peak_rss_bytes for m in ref])
        for tool in tools:
            runs = workload.runs[tool.key]
            walls, peaks = [m.wall_s for m in runs], [m.peak_rss_bytes for m in runs]
            predicted = workload.predicted.get(tool.key)
            lines.append(
                f"| {workload.name} ({workload.weights / MIB:.0f} MiB) | {tool.label} "
                f"| {_median(walls):.2f} [{min(walls):.2f}-{max(walls):.2f}] "
                f"| {_median(walls) / ref_wall:.2f} | {_median(peaks) / MIB:.1f} "
                f"| {_median(peaks) / max(ref_peak, 1):.1f} "
                f"| {'-' if predicted is None else f'{predicted / MIB:.1f}'} |"
            )
    return "\n".join(lines)


def speedup_line(workload: Workload) -> str:
    """2 workers against 1 on one workload: the wall-time ratio of each run, side by side."""
    one, two = workload.runs["lazyparams-1"], workload.runs["lazyparams-2"]
    ratios = [b.wall_s / a.wall_s for a, b in zip(one, two, strict=True)]
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    return (
        f"{workload.name}: wall time with 2 workers ÷ with 1 = {_median(ratios):.2f} "
        f"(median of {len(ratios)} runs side by side: {shown})"
    )


def environment() -> str:
    """The machine the numbers come from."""
    return (
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.system()} {platform.release()}"
    )


def markdown(
    workloads: Sequence[Workload], tools: Sequence[Tool], command: str, repeat: int, plot: str
) -> str:
    """The results page: command, environment, table, 2-vs-1 worker ratios, and the plot at
    the relative path `plot`."""
    speedups = "\n".join(f"- {speedup_line(w)}" for w in workloads)
    return (
        f"Produced by `{command}` ({repeat} runs per tool and workload, each in a fresh "
        f"interpreter; {environment()}).\n\n"
        "Wall time is the conversion call (tracing and compiling included); peak RSS is the "
        "peak resident memory over the interpreter's baseline after imports. Ratios are to "
        "lazyparams with 2 workers (below 1: less than lazyparams). Predicted peaks, known "
        "before any data is read: lazyparams' plan (with 2 workers, the bound they run within), "
        "all inputs and outputs at once for eager numpy, and the same analysis of the "
        "seed-style lazy function for TVM.\n\n"
        f"{table(workloads, tools)}\n\n{speedups}\n\n"
        f"![memory over time]({plot})\n"
    )


def update_results(text: str, command: str) -> None:
    """Put the command and the results under RESULTS.md's benchmark heading, between its
    markers (heading and markers are appended the first time)."""
    results = RESULTS_MD.read_text(encoding="utf-8")
    intro = (
        "Every tool converts the same checkpoints with the same transform, side by side:\n\n"
        f'```sh\npip install -e ".[bench]"\n{command}\n```\n\n'
    )
    section = f"{MARKERS[0]}\n{intro}{text}{MARKERS[1]}"
    if MARKERS[0] in results and MARKERS[1] in results:
        head, rest = results.split(MARKERS[0], 1)
        results = head + section + rest.split(MARKERS[1], 1)[1]
    else:
        results = results.rstrip("\n") + "\n\n## Benchmarks\n\n" + section + "\n"
    RESULTS_MD.write_text(results, encoding="utf-8")


# The command -----------------------------------------------------------------------------------


def workloads_of(args: argparse.Namespace) -> list[Workload]:
    found = [Workload(f"llama-like L={n}", "llama", n, args.d, args.f) for n in args.layers]
    if not args.no_real:
        name = f"real layout L={SHAPE.layers}, vocab {SHAPE.vocab}"
        found.append(Workload(name, "real", SHAPE.layers, SHAPE.hidden, SHAPE.intermediate))
    return found


def tools_of(args: argparse.Namespace) -> list[Tool]:
    has_tvm = importlib.util.find_spec("tvm") is not None and not args.no_tvm
    return [t for t in TOOLS if t.key != "tvm" or has_tvm]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = "python -m benchmarks.run_all" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    tools, workloads = tools_of(args), workloads_of(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp_name:
        tmp = Path(tmp_name)
        panels: list[dict[str, Any]] = []
        for workload in workloads:
            src = make_source(workload, tmp / f"src-{workload.kind}-{workload.layers}")
            predict(workload, src, tools)
            measure_workload(workload, src, tools, args.repeat, tmp)
            if workload.kind == "llama" and workload.layers == max(args.layers):
                panels = sample_panels(workload, src, tools, tmp)
            shutil.rmtree(src)
    text = markdown(workloads, tools, command, args.repeat, "memory.png")
    (out / "benchmarks.md").write_text(text, encoding="utf-8")
    if panels:
        title = f"memory over time, fuse-qkv+cast:float16 ({environment()})"
        timeline.plot(panels, out / "memory.png", title)
    if args.results:
        plot = os.path.relpath(out.resolve() / "memory.png", RESULTS_MD.parent)
        update_results(markdown(workloads, tools, command, args.repeat, plot), command)
    print(text)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run_all", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--f", type=int, default=1376)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-real", action="store_true", help="skip the real checkpoint layout")
    parser.add_argument("--no-tvm", action="store_true", help="skip TVM even if installed")
    parser.add_argument("--out", default=str(RESULTS), help="where the table and plot go")
    parser.add_argument("--work", default=None, help="folder for the temporary checkpoints")
    parser.add_argument(
        "--results", action="store_true", help="put the table into benchmarks/RESULTS.md"
    )
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
