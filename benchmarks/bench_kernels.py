"""Benchmark: the layout, cast, concat, fused and quantization kernels against a memory copy.

For each kernel and input size it times, side by side in one run (best of N, interleaved):
`np.copyto` between paged-in buffers of as many bytes as the kernel reads and writes in all (a
copy of (input + output) / 2 bytes: the floor any kernel that reads its input and writes its
output must pay); the straightforward numpy version the kernels replaced; the `*_into` loop
writing into a preallocated output (compiled loops when built); the registered kernel as the VM
runs it, its output from the buffer pool (a freed output of the same size, pages already in);
and the same kernel given a fresh output (its pages fault in on first write). Times are in
nanoseconds per input element; the ratios divide by the memcpy time. The `fused` group times
`R.layout_cast` (q, k, v joined, transposed and cast in one pass, as `FuseLayoutCast` compiles
`fuse-qkv+cast`), its "plain numpy" column the concat, transpose and cast kernels in turn.

Each timed call starts from the same cache: a read of other data (twice the largest cache, at
least 96 MiB: `cache_size.py`) before it evicts what the call before left there (with `--warm`,
not). Otherwise the variant after numpy's version pays for writing back the lines that one left
dirty (a float8 transpose then measured 2.1 times a copy, the same loop into another output
1.4), and a kernel timed back to back finds its input still in the L3 cache. Converting a
checkpoint, the data comes from the page cache, not the CPU's. Even so, a call right after
another variant's measures slower than one after a call of its own (a float8 transpose right
after the copy 1.8 times a copy's time, after a call of its own 1.5): so each timed call follows
an untimed one of the same variant, each after the read.

    python benchmarks/bench_kernels.py --sizes 64,256 --repeat 7
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, too

import lazyparams.op  # noqa: F401  (registers the ops)
from benchmarks.cache_size import eviction_bytes
from lazyparams.runtime import fast, native, quant, run_kernel
from lazyparams.runtime.pool import BUFFERS

Array = np.ndarray[Any, Any]
MIB = 1 << 20
BF16 = np.dtype(ml_dtypes.bfloat16)
F8 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)


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


_scale = [1.0]  # the standard deviation of the other groups' inputs (--scale)


def _square(mib: float, dtype: Any, scale: float | None = None) -> Array:
    """A random square matrix with as many elements as `mib` MiB of float32 (sides a multiple
    of 64), in `dtype`, of standard deviation `scale` (else --scale's): every row of one size
    moves the same number of elements."""
    side = int(math.sqrt(mib * MIB / 4)) // 64 * 64
    rng = np.random.default_rng(0)
    sigma = _scale[0] if scale is None else scale
    with np.errstate(over="ignore"):  # float8 and float16 saturate or overflow as they do
        return (rng.standard_normal((side, side), dtype=np.float32) * sigma).astype(dtype)


WEIGHT_SCALE = 0.02
"""The standard deviation of trained weights, about: one in 400 of them lies below float16's
least normal (a vector of 32 holds one every 13), which a conversion must round as such."""


def _transposes(mib: int) -> Iterator[Case]:
    for dtype in (np.float64, np.float32, np.float16, BF16, F8):
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
    for shape, axes in (
        ((16, x.shape[0] // 16, x.shape[1]), (0, 2, 1)),
        ((x.shape[0] // 64, 64, x.shape[1]), (1, 0, 2)),
    ):
        x3 = x.reshape(shape)
        out3 = np.empty(tuple(shape[a] for a in axes), x.dtype)
        yield Case(
            f"permute_dims float32 {axes}",
            [x3],
            "permute_dims",
            {"axes": axes},
            lambda x3=x3, axes=axes: np.ascontiguousarray(np.transpose(x3, axes)),
            lambda x3=x3, axes=axes, out3=out3: fast.permute_dims_into(x3, axes, out3),
        )


CAST_PAIRS = [
    (BF16, np.float16),
    (np.float32, np.float16),
    (np.float32, BF16),
    (np.float16, np.float32),
    (BF16, np.float32),
    (np.float16, BF16),
    (np.float32, F8),
    (F8, np.float32),
    (np.float32, E5M2),
    (E5M2, np.float32),
    (np.float16, F8),
    (BF16, E5M2),
    (F8, np.float16),
    (E5M2, BF16),
    (F8, E5M2),
    (np.float16, np.float64),
    (np.int64, np.int32),
    (np.int32, np.int64),
]


def _casts(mib: int) -> Iterator[Case]:
    for src, dst in CAST_PAIRS:
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
    """Three parts, as fused q/k/v weights are, along rows and along columns."""
    x = _square(mib / 3, np.float32)
    parts = (x, x + 1, x + 2)
    for axis in (0, 1):
        yield Case(
            f"concat float32 x3 axis={axis}",
            [parts],
            "concat",
            {"axis": axis},
            lambda axis=axis: np.concatenate(parts, axis=axis),
            lambda axis=axis: fast.concat(parts, axis),
        )


def _unfused(parts: tuple[Array, ...], dtype: Any) -> Array:
    """What `FuseLayoutCast` replaces: the concat, transpose and cast kernels one after the
    other, each output a fresh intermediate."""
    joined = run_kernel("concat", [parts], {"axis": 0}) if len(parts) > 1 else parts[0]
    moved = run_kernel("permute_dims", [joined], {"axes": (1, 0)})
    return run_kernel("astype", [moved], {"dtype": str(np.dtype(dtype))})  # type: ignore[no-any-return]


def _fused(mib: int) -> Iterator[Case]:
    """`R.layout_cast` as the fuse-qkv+cast recipes run it: q, k, v (and a lone linear weight)
    joined, transposed and cast in one pass; "plain numpy" is the unfused kernels in turn. The
    inputs are weight-like (WEIGHT_SCALE), as those recipes find them."""
    x = _square(mib / 3, BF16, WEIGHT_SCALE)
    side = x.shape[0]
    for parts in ((x, x[: side // 4], x[: side // 4]), (_square(mib, BF16, WEIGHT_SCALE),)):
        for dtype in (np.float16,):
            yield Case(
                f"layout_cast bfloat16 x{len(parts)} -> {np.dtype(dtype)} (1, 0)",
                [parts if len(parts) > 1 else parts[0]],
                "layout_cast",
                {"axis": 0, "axes": (1, 0), "dtype": str(np.dtype(dtype))},
                lambda parts=parts, dtype=dtype: _unfused(parts, dtype),
            )


GROUPS = {
    "permute": _transposes,
    "astype": _casts,
    "quantize": _quantizers,
    "concat": _concats,
    "fused": _fused,
}


# Timing ----------------------------------------------------------------------------------------


def _output_bytes(result: Any) -> int:
    """Bytes of the arrays in a result (tuples summed)."""
    if isinstance(result, tuple):
        return sum(_output_bytes(r) for r in result)
    return int(result.nbytes)


def _buffers(nbytes: int) -> tuple[Array, Array]:
    """A source and a destination of `nbytes`, both already paged in."""
    return np.ones(nbytes, np.uint8), np.ones(nbytes, np.uint8)


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}
_clock = [time.perf_counter]
_settle: list[Array] = []  # the data read before each timed call (none with --warm)


def _settle_cache() -> None:
    for other in _settle:
        np.bitwise_or.reduce(other)  # evicts the cache's lines, writing back the dirty ones


def _time(fn: Callable[[], Any]) -> float:
    clock = _clock[0]
    if _settle:  # a call of its own first (see the module's doc)
        _settle_cache()
        fn()
    _settle_cache()
    start = clock()
    result = fn()
    elapsed = clock() - start
    del result  # freed outside the timed region, as a kernel's result is freed by its consumer
    return elapsed


def measure(case: Case, repeat: int) -> dict[str, float]:
    """Best-of-`repeat` seconds of each variant, the variants interleaved within each round."""
    case.out_bytes = _output_bytes(run_kernel(case.op, case.inputs, case.attrs))
    moved = (_output_bytes(tuple(case.inputs)) + case.out_bytes) // 2
    src, dst = _buffers(moved)
    kernel = functools.partial(run_kernel, case.op, case.inputs, case.attrs)
    variants: dict[str, Callable[[], Any]] = {
        "memcpy": lambda: np.copyto(dst, src),
        "old": case.old,
        "kernel": kernel,
    }
    if case.into is not None:
        variants["into"] = case.into
    with BUFFERS.watch(lambda: 1 << 40):  # the pool keeps what the timed kernel frees
        best = _best(variants, repeat)
    best |= _best({"fresh": kernel}, repeat)  # unwatched, the pool hands out fresh arrays
    return best


def _best(variants: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    best = dict.fromkeys(variants, math.inf)
    for fn in variants.values():
        fn()  # warm up: tables, page cache, allocator, the pool
    for _ in range(repeat):
        for name, fn in variants.items():
            best[name] = min(best[name], _time(fn))
    return best


def _elements(case: Case) -> int:
    """Input elements (all parts of a concat)."""
    first = case.inputs[0]
    return sum(p.size for p in first) if isinstance(first, tuple) else int(first.size)


def _row(case: Case, t: dict[str, float]) -> str:
    ns = {k: v * 1e9 / _elements(case) for k, v in t.items()}
    x = case.inputs[0][0] if isinstance(case.inputs[0], tuple) else case.inputs[0]
    into = ns.get("into")
    cells = [
        case.name,
        "x".join(map(str, x.shape)),
        f"{(_output_bytes(tuple(case.inputs)) + case.out_bytes) / MIB:.0f}",
        f"{ns['memcpy']:.2f}",
        f"{ns['old']:.2f}",
        "-" if into is None else f"{into:.2f}",
        f"{ns['kernel']:.2f}",
        f"{ns['fresh']:.2f}",
        "-" if into is None else f"{into / ns['memcpy']:.2f}x",
        f"**{ns['kernel'] / ns['memcpy']:.2f}x**",
        f"{ns['fresh'] / ns['memcpy']:.2f}x",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| kernel | input shape | MiB read + written | memcpy ns/el | plain numpy ns/el "
    "| into ns/el | kernel ns/el | fresh output ns/el | into / memcpy | kernel / memcpy "
    "| fresh / memcpy |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="64,256", help="sizes in MiB of float32 elements, comma separated"
    )
    parser.add_argument("--repeat", type=int, default=7, help="rounds; the best time is kept")
    parser.add_argument("--only", default=",".join(GROUPS), help="groups: " + ", ".join(GROUPS))
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall time, or the CPU time of this thread (page faults included; the kernels run "
        "on it), which other processes on a busy machine disturb less",
    )
    parser.add_argument(
        "--warm", action="store_true", help="time each call in the cache the one before left"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="standard deviation of the random inputs but the fused group's (always weight-like, "
        f"{WEIGHT_SCALE}); conversions whose work depends on the values differ by it",
    )
    args = parser.parse_args()
    _clock[0] = CLOCKS[args.clock]
    _scale[0] = args.scale
    if not args.warm:
        _settle.append(np.ones(eviction_bytes() // 8, np.uint64))
    print(
        f"numpy {np.__version__}, {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}; "
        f"best of {args.repeat} ({args.clock} clock, {'warm' if args.warm else 'cold'} cache, "
        f"inputs of standard deviation {args.scale}); "
        f"compiled loops {'built' if native.enabled() else 'absent'}\n"
    )
    print(HEADER)
    for mib in (int(s) for s in args.sizes.split(",")):
        for group in args.only.split(","):
            for case in GROUPS[group](mib):
                print(_row(case, measure(case, args.repeat)), flush=True)


if __name__ == "__main__":
    main()
