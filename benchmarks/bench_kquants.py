"""Benchmark: ggml's K-quants (`runtime.gguf_kquants`) against a memory copy of their input.

For each type it times, side by side in one run (best of N, interleaved): `np.copyto` of the
float32 input into a preallocated buffer, the compiled quantizer, the numpy one, ggml's own
reference quantizer (`quantize_row_*_ref` from the `libggml-python` wheel, when it loads), and
the dequantizers. Times are the calling thread's CPU time (every path runs on that one thread),
so other load on the machine does not inflate them; figures are nanoseconds per float32 value.

    python benchmarks/bench_kquants.py --rows 256 --cols 4096 --repeat 5
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lazyparams.runtime import gguf_kquants, native

Array = np.ndarray[Any, Any]


def ggml_reference() -> ctypes.CDLL | None:
    """ggml's base library from the `libggml-python` wheel, or None where it does not load."""
    spec = importlib.util.find_spec("libggml")
    if spec is None or spec.origin is None:
        return None
    try:
        return ctypes.CDLL(str(Path(spec.origin).parent / "lib64" / "libggml-base.so"))
    except OSError:
        return None


def ggml_quantizer(lib: ctypes.CDLL, kind: str, x: Array, out: Array) -> Callable[[], None]:
    """A call of ggml's reference quantizer of `kind` over all of x into out."""
    fn = getattr(lib, f"quantize_row_{kind[:-1]}K_ref")
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    return lambda: fn(x.ctypes.data, out.ctypes.data, x.size)


def cpu_ns(fn: Callable[[], object], size: int) -> float:
    """CPU time of one call of fn on this thread, in nanoseconds per value."""
    start = time.thread_time_ns()
    fn()
    return (time.thread_time_ns() - start) / size


def on_path(compiled: bool, fn: Callable[[], object]) -> Callable[[], object]:
    """fn run with the compiled loops on or off."""

    def run() -> object:
        with native.use_native(compiled):
            return fn()

    return run


def contenders(kind: str, x: Array, lib: ctypes.CDLL | None) -> dict[str, Callable[[], object]]:
    """The timed calls for one type, by column name."""
    copy = np.empty_like(x)
    blocks = gguf_kquants.QUANTIZE[kind](x)
    quantize, dequantize = gguf_kquants.QUANTIZE[kind], gguf_kquants.DEQUANTIZE[kind]
    calls: dict[str, Callable[[], object]] = {"memcpy": lambda: np.copyto(copy, x)}
    if native.available():
        calls["C quant"] = on_path(True, lambda: quantize(x))
    calls["numpy quant"] = on_path(False, lambda: quantize(x))
    if lib is not None:
        calls["ggml ref"] = ggml_quantizer(lib, kind, x, np.empty_like(blocks))
    if native.available():
        calls["C dequant"] = on_path(True, lambda: dequantize(blocks, x.shape[1]))
    calls["numpy dequant"] = on_path(False, lambda: dequantize(blocks, x.shape[1]))
    return calls


def measure(kind: str, x: Array, lib: ctypes.CDLL | None, repeat: int) -> dict[str, float]:
    """Best of `repeat` interleaved rounds of every contender, ns per value."""
    calls = contenders(kind, x, lib)
    best = {name: float("inf") for name in calls}
    for _ in range(repeat):
        for name, fn in calls.items():
            best[name] = min(best[name], cpu_ns(fn, x.size))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=4096, help="a multiple of 256")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((args.rows, args.cols)) * 0.02).astype(np.float32)
    lib = ggml_reference()
    print(f"{platform.processor() or platform.machine()}, float32 input {x.shape}, ns per value")
    print("(CPU time of one thread; 'x memcpy' = quantizer time / memcpy time)")
    header = None
    for kind in gguf_kquants.QUANTIZE:
        figures = measure(kind, x, lib, args.repeat)
        if header is None:
            header = ["type", *figures, "C x memcpy"]
            print("  ".join(f"{h:>13}" for h in header))
        ratio = figures.get("C quant", figures["numpy quant"]) / figures["memcpy"]
        cells = [kind, *(f"{v:.2f}" for v in figures.values()), f"{ratio:.0f}"]
        print("  ".join(f"{c:>13}" for c in cells))


if __name__ == "__main__":
    main()
