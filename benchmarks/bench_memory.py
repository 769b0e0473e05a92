"""Benchmark: peak memory of the llama-like transform, eager vs seed-style lazy vs the pipeline.

For each layer count, the weights are written as .npy files; then each way of running the
transform runs in its own subprocess, reading the weights from disk and writing the outputs to
disk: `eager` loads every weight, runs the eager function and saves the outputs; `seed-lazy`
runs `LazyTransformParams` alone (no schedule); `pipeline` runs `standard_pipeline()`. Each
child reports its peak RSS over its baseline (after compiling, before reading data; Linux
resets the high-water mark through /proc/self/clear_refs), the VM's metered peak, the predicted
peak and the wall time. Prints one markdown table.

    python benchmarks/bench_memory.py --layers 8 16 32 --d 512 --f 1376
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MODES = ("eager", "seed-lazy", "pipeline")
FUNC = "main_transform_params"
MIB = 1024 * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak_rss() -> None:
    """Make VmHWM restart from the current RSS (Linux 4.0 and later)."""
    Path("/proc/self/clear_refs").write_text("5")


def _compile(mode: str, layers: int, d: int, f: int) -> tuple[Any, Any, int]:
    """The module to run, the eager module, and the predicted peak of the function run."""
    from benchmarks.workloads import llama_like
    from lazyparams.analysis import estimate_peak_memory, weight_struct_info
    from lazyparams.transform import LazyTransformParams, standard_pipeline

    eager = llama_like(layers, d, f)
    if mode == "eager":
        return eager, eager, estimate_peak_memory(eager[FUNC]).peak_bytes
    lazy = standard_pipeline()(eager) if mode == "pipeline" else LazyTransformParams()(eager)
    inputs = weight_struct_info(eager[FUNC])
    return lazy, eager, estimate_peak_memory(lazy[FUNC], inputs=inputs).peak_bytes


def child(mode: str, layers: int, d: int, f: int, folder: Path) -> dict[str, Any]:
    """Run one configuration in this process and measure it."""
    from lazyparams.runtime import VirtualMachine

    mod, _, predicted = _compile(mode, layers, d, f)
    count = len(list(folder.glob("w*.npy")))
    out = folder / f"out-{mode}"
    out.mkdir(exist_ok=True)

    def get_item(i: int) -> np.ndarray[Any, Any]:
        return np.load(folder / f"w{i}.npy")

    def set_item(i: int, value: np.ndarray[Any, Any]) -> None:
        np.save(out / f"o{i}.npy", value)

    vm = VirtualMachine(mod, {"get_item": get_item, "set_item": set_item})
    gc.collect()
    baseline = _status_kib("VmRSS")
    _reset_peak_rss()
    start = time.perf_counter()
    if mode == "eager":
        results = vm[FUNC](tuple(get_item(i) for i in range(count)))
        for i, value in enumerate(results):
            set_item(i, value)
        del results
    else:
        vm[FUNC]()
    wall = time.perf_counter() - start
    peak = _status_kib("VmHWM")
    return {
        "rss_over_baseline": (peak - baseline) * 1024,
        "vm_peak": vm.stats.peak_bytes,
        "predicted": predicted,
        "wall_s": wall,
    }


def write_weights(layers: int, d: int, f: int, folder: Path) -> int:
    """Write the inputs of `llama_like(layers, d, f)` as w{i}.npy; returns their total bytes."""
    from benchmarks.workloads import llama_inputs

    total = 0
    for i, weight in enumerate(llama_inputs(layers, d, f)):
        np.save(folder / f"w{i}.npy", weight)
        total += weight.nbytes
    return total


def run(layers_list: list[int], d: int, f: int) -> list[dict[str, Any]]:
    rows = []
    for layers in layers_list:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            total = write_weights(layers, d, f, folder)
            row: dict[str, Any] = {"layers": layers, "weights": total}
            for mode in MODES:
                command = [sys.executable, __file__, "--child", mode, str(layers), str(d), str(f)]
                done = subprocess.run(
                    [*command, tmp], check=True, capture_output=True, text=True, cwd=_root()
                )
                row[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
    return rows


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def table(rows: list[dict[str, Any]]) -> str:
    """One markdown table: per layer count and mode, RSS over baseline, meter, prediction."""
    lines = [
        "| L | weights | mode | peak RSS over baseline | x eager | VM meter | predicted | wall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        eager = row["eager"]["rss_over_baseline"]
        for mode in MODES:
            r = row[mode]
            lines.append(
                f"| {row['layers']} | {row['weights'] / MIB:.0f} MiB | {mode} "
                f"| {r['rss_over_baseline'] / MIB:.1f} MiB | {r['rss_over_baseline'] / eager:.3f} "
                f"| {r['vm_peak'] / MIB:.1f} MiB | {r['predicted'] / MIB:.1f} MiB "
                f"| {r['wall_s']:.2f} s |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--f", type=int, default=1376)
    parser.add_argument("--child", nargs=5, metavar=("MODE", "L", "D", "F", "DIR"))
    args = parser.parse_args()
    if args.child:
        mode, layers, d, f, folder = args.child
        print(json.dumps(child(mode, int(layers), int(d), int(f), Path(folder))))
        return
    print(f"llama-like transform, d={args.d}, f={args.f}, float32 -> float16\n")
    print(table(run(args.layers, args.d, args.f)))


if __name__ == "__main__":
    sys.path.insert(0, str(_root()))
    main()
