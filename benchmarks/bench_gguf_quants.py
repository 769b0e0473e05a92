"""Benchmark: every GGML block quantizer and dequantizer of the registry against a memory copy.

For each type in `runtime.gguf_quants.QUANTIZE` (and each in `DEQUANTIZE`) it times, side by
side in one run (best of N, interleaved): `np.copyto` of the float32 side's bytes (the input
of a quantizer, the output of a dequantizer) into a preallocated buffer, the numpy path, the
compiled path where the extension has one, and the op kernel as the VM runs it (chunks,
finiteness check and fresh output included). "kernel / memcpy" divides the kernel's time by
the copy's. The K-quants appear once their kernels are in the registry.

    python benchmarks/bench_gguf_quants.py --mib 64 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.block_types import BLOCK_TYPES
from lazyparams.runtime import native, native_gguf, run_kernel
from lazyparams.runtime.gguf_quants import DEQUANTIZE, QUANTIZE

Array = np.ndarray[Any, Any]
MIB = 1 << 20


def weights(mib: float) -> Array:
    """Random float32 rows of 4096 values (a multiple of every block size), about `mib` MiB."""
    rows = max(1, int(mib * MIB / 4 / 4096))
    return np.random.default_rng(0).standard_normal((rows, 4096), dtype=np.float32) * 0.02


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def _best(variants: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Best-of-`repeat` seconds of each variant, interleaved within each round."""
    best = dict.fromkeys(variants, math.inf)
    for fn in variants.values():
        fn()  # warm up: pages, tables, allocator
    for _ in range(repeat):
        for name, fn in variants.items():
            best[name] = min(best[name], _time(fn))
    return best


def _paths(fn: Callable[[], Any], compiled: bool) -> dict[str, Callable[[], Any]]:
    """The numpy path and, where the extension has one, the compiled path of `fn`."""

    def numpy_only() -> Any:
        with native.use_native(False):
            return fn()

    paths: dict[str, Callable[[], Any]] = {"numpy": numpy_only}
    if compiled:
        paths["native"] = fn
    return paths


def quantizer_row(type_name: str, x: Array, repeat: int) -> dict[str, Any]:
    copy = np.empty_like(x)
    compiled = native.available() and type_name in native_gguf.LEGACY_TYPES
    variants = {
        "memcpy": lambda: np.copyto(copy, x),
        **_paths(lambda: QUANTIZE[type_name](x), compiled),
        "kernel": lambda: run_kernel("quantize_gguf", [x], {"type": type_name}),
    }
    return {"op": f"quantize {type_name}", "bytes": x.nbytes, **_best(variants, repeat)}


def dequantizer_row(type_name: str, q: Array, n: int, repeat: int) -> dict[str, Any]:
    """Against a copy of the float32 output: the larger side of a dequantization."""
    values = np.ones((q.shape[0], n), np.float32)
    copy = np.empty_like(values)
    attrs = {"type": type_name, "dtype": "float32"}
    compiled = native.available() and type_name in native_gguf.LEGACY_TYPES
    variants = {
        "memcpy": lambda: np.copyto(copy, values),
        **_paths(lambda: DEQUANTIZE[type_name](q, n), compiled),
        "kernel": lambda: run_kernel("dequantize_gguf", [q], attrs),
    }
    return {"op": f"dequantize {type_name}", "bytes": values.nbytes, **_best(variants, repeat)}


def _blocks(type_name: str, x: Array) -> Array:
    """Blocks of `type_name` for x's rows: quantized where there is a quantizer, else random
    bytes whose aligned 2-byte fields are finite float16s."""
    if type_name in QUANTIZE:
        return QUANTIZE[type_name](x)
    raw = np.random.default_rng(1).integers(
        0, 256, BLOCK_TYPES[type_name].storage_shape(x.shape), np.uint8
    )
    raw[..., 1::2] &= 0x3B
    return raw


def _cell(row: dict[str, Any], key: str) -> str:
    seconds = row.get(key)
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.1f} ms ({row['bytes'] / seconds / 1e9:.2f} GB/s)"


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the measured rows."""
    lines = [
        "| op | float32 side | memcpy | numpy | native | kernel | kernel / memcpy |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = [_cell(row, key) for key in ("memcpy", "numpy", "native", "kernel")]
        ratio = row["kernel"] / row["memcpy"]
        size = f"{row['bytes'] / MIB:.1f} MiB"
        lines.append(f"| {row['op']} | {size} | {' | '.join(cells)} | {ratio:.1f}x |")
    return "\n".join(lines)


def run(mib: float, repeat: int, dequantize_all: bool) -> list[dict[str, Any]]:
    """Every quantizer, then the dequantizers (all of them, or those with a quantizer)."""
    x = weights(mib)
    rows = [quantizer_row(name, x, repeat) for name in QUANTIZE]
    names = list(DEQUANTIZE) if dequantize_all else list(QUANTIZE)
    for name in names:
        rows.append(dequantizer_row(name, _blocks(name, x), x.shape[1], repeat))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=64, help="float32 input size (MiB)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best counts")
    parser.add_argument(
        "--all-dequantizers", action="store_true", help="also the types read through gguf-py"
    )
    args = parser.parse_args(argv)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"compiled loops: {native.available()}\n"
    )
    print(table(run(args.mib, args.repeat, args.all_dequantizers)))


if __name__ == "__main__":
    main()
