"""Benchmark: the TIR layout transform of a 4096 x 4096 float32 weight on the VM vs numpy.

Times `R.call_tir` of a transpose PrimFunc through the VM (output allocation included) and the
PrimFunc alone on a preallocated output, against `numpy.ascontiguousarray(x.T)`; prints a
markdown table of median times and their ratio to numpy. The goal is within 2x of numpy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T


@I.ir_module
class Layout:
    @T.prim_func
    def transpose(x: T.Buffer((4096, 4096), "float32"), out: T.Buffer((4096, 4096), "float32")):
        for i, j in T.grid(4096, 4096):
            with T.block("transpose"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(x[vj, vi])
                T.writes(out[vi, vj])
                out[vi, vj] = x[vj, vi]

    @R.function
    def main(x: R.Tensor((4096, 4096), "float32")) -> R.Tensor((4096, 4096), "float32"):
        cls = Layout
        y = R.call_tir(cls.transpose, (x,), out_sinfo=R.Tensor((4096, 4096), "float32"))
        return y


def _median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm up: page in the input, import paths, allocator
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    x = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    vm = VirtualMachine(Layout)
    out = np.empty((4096, 4096), np.float32)
    assert np.array_equal(vm["main"](x), x.T)
    rows = {
        "numpy.ascontiguousarray(x.T)": lambda: np.ascontiguousarray(x.T),
        "VM: R.call_tir (allocates)": lambda: vm["main"](x),
        "PrimFunc in place": lambda: vm["transpose"](x, out),
    }
    times = {name: _median_seconds(fn, args.repeats) for name, fn in rows.items()}
    base = times["numpy.ascontiguousarray(x.T)"]
    print("| 4096 x 4096 float32 transpose | median ms | ratio to numpy |")
    print("|---|---:|---:|")
    for name, seconds in times.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {seconds / base:.2f}x |")


if __name__ == "__main__":
    main()
