"""What a conversion's quantization costs when the compiled loops are not in use.

The numpy loops give the same bits as the compiled ones (`runtime.native`), only slower. On
the demo's checkpoint (8 layers, d=512, f=1376, float32: `lazyparams demo --recipe R`, with
and without `LAZYPARAMS_NATIVE=0`, on 2 busy cores), the conversion took: gguf:Q4_K_M 34x as
long (26-48x over runs; 4 layers: 30x), gguf:Q6_K 21x, gguf:q4_0 8-10x, gguf:q8_0 3-5x,
quantize-int4 about 2x, quantize-int8 about 1.3x. A plan that quantizes gets a one-line notice
with the cost of its slowest kind. Imports `ir` and `runtime.native`.
"""

from __future__ import annotations

import os

from lazyparams.ir import Call, Function, Op
from lazyparams.runtime import native

K_QUANT_SLOWDOWN = 35
"""Measured: gguf:Q4_K_M, the numpy loops over the compiled ones (module docstring)."""
SLOWDOWN = {"quantize_gguf": 10, "quantize_int4": 2, "quantize_int8": 1.3}
"""Measured, per op: the legacy GGML types (q4_0; q8_0 less), int4, int8."""


def quantized_kinds(func: Function) -> dict[str, float]:
    """What `func` quantizes to (`q4_k`, `int8`, ...) -> the numpy loops' slowdown."""
    kinds: dict[str, float] = {}
    for binding in func.bindings():
        call = binding.value
        if not isinstance(call, Call) or not isinstance(call.op, Op):
            continue
        name = call.op.name
        if name == "quantize_gguf":
            kind = str(call.attrs.get("type", "")).lower()
            kinds[kind] = K_QUANT_SLOWDOWN if kind.endswith("_k") else SLOWDOWN[name]
        elif name in SLOWDOWN:
            kinds[name.removeprefix("quantize_")] = SLOWDOWN[name]
    return kinds


def slow_loops_notice(func: Function) -> str | None:
    """A one-line warning when `func` quantizes and the compiled loops are not in use (not
    built, or `LAZYPARAMS_NATIVE=0`), with what it costs; else None."""
    if native.enabled():
        return None
    kinds = quantized_kinds(func)
    if not kinds:
        return None
    factor = max(kinds.values())
    return (
        f"the compiled loops are {_why_not_in_use()}: quantizing to {', '.join(sorted(kinds))} "
        f"with numpy takes about {factor:g}x as long as with them"
    )


def _why_not_in_use() -> str:
    if os.environ.get("LAZYPARAMS_NATIVE") == "0":
        return "turned off by LAZYPARAMS_NATIVE=0"
    return "turned off" if native.available() else "not built"
