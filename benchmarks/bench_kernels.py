"""Benchmark: the layout, cast, quantization and concat kernels against a plain memory copy.

For each kernel and input size it times, side by side in one run (best of N, interleaved):
`np.copyto` of the input's and of the output's bytes into preallocated buffers (the floor any
kernel that reads its input and writes its output must pay), the straightforward numpy version
the kernels replaced, the `*_into` loop writing into a preallocated output with only the numpy
loops and with the compiled loops (when the extension is built), and the registered kernel as
the VM runs it (fresh output included). "best / memcpy" divides the `*_into` time the library
uses (compiled when built, else the numpy loops) by the larger of the two copies: a plain memory
copy of the bytes the kernel moves.

    python benchmarks/bench_kernels.py --sizes 64,256 --repeat 7
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.runtime import fast, native, quant, run_kernel

Array = np.ndarray[Any, Any]
MIB = 1 << 20
BF16 = np.dtype(ml_dtypes.bfloat16)
F8 = np.dtype(ml_dtypes.float8_e4m3fn)


# The straightforward numpy versions the kernels replaced -------------------------------------


def old_quantize_int8(x: Array, axis: int) -> tuple[Array, Array]:
    x = x.astype(np.float32)
    others = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
    amax = np.max(np.abs(x), axis=others, initial=0)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.clip(np.rint(x / scale.reshape(shape)), -127, 127).astype(np.int8), scale


def old_quantize_int4(x: Array, group_size: int) -> tuple[Array, Array]:
    x = x.astype(np.float32)
    n, k = x.shape
    groups = x.reshape(n, k // group_size, group_size)
    amax = np.max(np.abs(groups), axis=2, initial=0)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(7)).astype(np.float32)
    q = np.clip(np.rint(groups / scale[..., None]), -8, 7).astype(np.int8).reshape(n, k)
    nibbles = q.astype(np.uint8) & np.uint8(0xF)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << np.uint8(4)), scale


# Cases -----------------------------------------------------------------------------------------


@dataclass
class Case:
    """One row of the table: a kernel on one input, with its old and preallocated variants."""

    name: str
    inputs: list[Array]
    op: str
    attrs: dict[str, Any]
    old: Callable[[], Any]
    into: Callable[[], Any] | None = None
    out_bytes: int = 0


def _square(mib: float, dtype: Any) -> Array:
    """A random square matrix with as many elements as `mib` MiB of float32 (sides a multiple
    of 64), in `dtype`: every row of one size moves the same number of elements."""
    side = int(math.sqrt(mib * MIB / 4)) // 64 * 64
    rng = np.random.default_rng(0)
    return rng.standard_normal((side, side), dtype=np.float32).astype(dtype)


def _transposes(mib: int) -> Iterator[Case]:
    for dtype in (np.float32, np.float16):
        x = _square(mib, dtype)
        out = np.empty_like(x)
        yield Case(
            f"permute_dims {x.dtype} (1, 0)",
            [x],
            "permute_dims",
            {"axes": (1, 0)},
            lambda x=x: np.ascontiguousarray(np.transpose(x)),
            lambda x=x, out=out: fast.permute_dims_into(x, (1, 0), out),
        )
    x = _square(mib, np.float32)
    x3 = x.reshape(16, x.shape[0] // 16, x.shape[1])
    out3 = np.empty((16, x3.shape[2], x3.shape[1]), x.dtype)
    yield Case(
        "permute_dims float32 (0, 2, 1)",
        [x3],
        "permute_dims",
        {"axes": (0, 2, 1)},
        lambda: np.ascontiguousarray(np.transpose(x3, (0, 2, 1))),
        lambda: fast.permute_dims_into(x3, (0, 2, 1), out3),
    )


def _casts(mib: int) -> Iterator[Case]:
    pairs = [(np.float32, np.float16), (np.float32, BF16), (np.float32, F8)]
    pairs += [(np.float16, np.float32), (BF16, np.float32), (F8, np.float32)]
    for src, dst in pairs:
        x = _square(mib, src)
        out = np.empty(x.shape, dst)
        yield Case(
            f"astype {x.dtype} -> {np.dtype(dst)}",
            [x],
            "astype",
            {"dtype": str(np.dtype(dst))},
            lambda x=x, dst=dst: x.astype(dst),
            lambda x=x, out=out: fast.cast_into(x, out),
        )


def _quantizers(mib: int) -> Iterator[Case]:
    for dtype, axis in ((np.float32, 0), (np.float32, 1), (np.float16, 0)):
        x = _square(mib, dtype)
        q, scale = np.empty(x.shape, np.int8), np.empty(x.shape[axis], np.float32)
        yield Case(
            f"quantize_int8 {x.dtype} axis={axis}",
            [x],
            "quantize_int8",
            {"axis": axis},
            lambda x=x, axis=axis: old_quantize_int8(x, axis),
            lambda x=x, axis=axis, q=q, s=scale: quant.quantize_int8_into(x, axis, q, s),
        )
    x = _square(mib, np.float32)
    packed = np.empty((x.shape[0], x.shape[1] // 2), np.uint8)
    scales = np.empty((x.shape[0], x.shape[1] // 32), np.float32)
    yield Case(
        "quantize_int4 float32 group=32",
        [x],
        "quantize_int4",
        {"group_size": 32},
        lambda: old_quantize_int4(x, 32),
        lambda: quant.quantize_int4_into(x, 32, packed, scales),
    )


def _concats(mib: int) -> Iterator[Case]:
    x = _square(mib / 2, np.float32)
    y = x + 1
    for axis in (0, 1):
        yield Case(
            f"concat float32 x2 axis={axis}",
            [(x, y)],
            "concat",
            {"axis": axis},
            lambda axis=axis: np.concatenate((x, y), axis=axis),
        )


GROUPS = {"permute": _transposes, "astype": _casts, "quantize": _quantizers, "concat": _concats}


# Timing ----------------------------------------------------------------------------------------


def _output_bytes(result: Any) -> int:
    """Bytes of the arrays in a result (tuples summed)."""
    if isinstance(result, tuple):
        return sum(_output_bytes(r) for r in result)
    return int(result.nbytes)


def _buffers(nbytes: int) -> tuple[Array, Array]:
    """A source and a destination of `nbytes`, both already paged in."""
    return np.ones(nbytes, np.uint8), np.ones(nbytes, np.uint8)


def _time(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result  # freed outside the timed region, as a kernel's result is freed by its consumer
    return elapsed


def measure(case: Case, repeat: int) -> dict[str, float]:
    """Best-of-`repeat` seconds of each variant, the variants interleaved within each round."""
    case.out_bytes = _output_bytes(run_kernel(case.op, case.inputs, case.attrs))
    src, dst = _buffers(case.out_bytes)
    in_bytes = _output_bytes(tuple(case.inputs))
    in_src, in_dst = (src, dst) if in_bytes == case.out_bytes else _buffers(in_bytes)
    variants: dict[str, Callable[[], Any]] = {
        "memcpy": lambda: np.copyto(dst, src),
        "memcpy_in": lambda: np.copyto(in_dst, in_src),
        "old": case.old,
        "kernel": lambda: run_kernel(case.op, case.inputs, case.attrs),
    }
    if case.into is not None:
        into = case.into
        variants["numpy"] = lambda: _without_native(into)
        if native.available():
            variants["native"] = into
    best = dict.fromkeys(variants, math.inf)
    for fn in variants.values():
        fn()  # warm up: tables, page cache, allocator
    for _ in range(repeat):
        for name, fn in variants.items():
            best[name] = min(best[name], _time(fn))
    return best


def _without_native(fn: Callable[[], Any]) -> Any:
    with native.use_native(False):
        return fn()


def _row(case: Case, t: dict[str, float]) -> str:
    ms = {k: v * 1e3 for k, v in t.items()}
    floor = max(ms["memcpy"], ms["memcpy_in"])
    best = ms.get("native", ms.get("numpy", ms["kernel"]))
    x = case.inputs[0][0] if isinstance(case.inputs[0], tuple) else case.inputs[0]
    cells = [
        case.name,
        "x".join(map(str, x.shape)),
        f"{case.out_bytes / MIB:.3g} MiB",
        f"{ms['memcpy_in']:.1f}",
        f"{ms['memcpy']:.1f}",
        f"{ms['old']:.1f}",
        "-" if "numpy" not in ms else f"{ms['numpy']:.1f}",
        "-" if "native" not in ms else f"{ms['native']:.1f}",
        f"{ms['kernel']:.1f}",
        f"**{best / floor:.2f}x**",
        f"{ms['old'] / best:.1f}x",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| kernel | input shape | output | memcpy in ms | memcpy out ms | plain numpy ms "
    "| numpy loops ms | compiled ms | kernel ms | best / memcpy | plain / best |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="64,256", help="sizes in MiB of float32 elements, comma separated"
    )
    parser.add_argument("--repeat", type=int, default=7, help="rounds; the best time is kept")
    parser.add_argument("--only", default=",".join(GROUPS), help="groups: " + ", ".join(GROUPS))
    args = parser.parse_args()
    print(
        f"numpy {np.__version__}, {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}; "
        f"best of {args.repeat}; compiled loops {'built' if native.available() else 'absent'}\n"
    )
    print(HEADER)
    for mib in (int(s) for s in args.sizes.split(",")):
        for group in args.only.split(","):
            for case in GROUPS[group](mib):
                print(_row(case, measure(case, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
