"""The compiled GGML block quantizers of `runtime/csrc/gguf_*.c`, behind checked wrappers that
say whether they ran (as `runtime.native`'s do): the legacy types q4_0 to q8_0 and the k-quants.
A False or None leaves the caller its numpy path. Imports numpy and `runtime.native`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from lazyparams.runtime.native import (
    CAST16_KINDS,
    F32,
    Array,
    _cast16_agrees,
    _flat,
    _module,
    _words,
    enabled,
)

LEGACY_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
"""The block types of `runtime/csrc/gguf_legacy.c`."""


def quantize_legacy(type_name: str, rows: Array, out: Array) -> int | None:
    """ggml's reference bytes of the rows (rows, n) into `out` (rows, n / 32 * type size,
    uint8): -1 when done, the index of the first 32-value block holding a NaN or infinity
    (out then partial), or None when the compiled loop is off or cannot take them. The rows
    are float32, or 16-bit floats the loop converts to float32 (bit for bit as numpy) a few
    blocks at a time: one call, the GIL released once, for a whole tensor."""
    if not enabled() or not hasattr(_module(), "quantize_legacy"):
        return None
    kind = legacy_source_kind(rows.dtype)
    if type_name not in LEGACY_TYPES or kind is None or out.dtype != np.uint8:
        return None
    if not (_flat_layout(rows) and _flat_layout(out) and out.flags.writeable):
        return None
    if np.may_share_memory(rows, out) or rows.ndim != 2 or out.shape[0] != rows.shape[0]:
        return None
    flat = _flat(rows) if kind == "" else _words(_flat(rows))
    found: int = _module().quantize_legacy(type_name, flat, _flat(out), kind)
    return found


@functools.cache
def legacy_source_kind(dtype: np.dtype[Any]) -> str | None:
    """How the compiled legacy quantizers read rows of `dtype`: '' for float32, the exact
    `cast16` kind to float32 for the 16-bit floats, None for others."""
    if dtype == F32:
        return ""
    kind = f"{dtype}>float32"
    if kind in CAST16_KINDS and _cast16_agrees(kind):
        return kind
    return None


def dequantize_legacy(type_name: str, q: Array, out: Array) -> bool:
    """The float32 values of the legacy blocks `q` (uint8 rows of whole blocks) into `out`
    (float32, 32 values a block); False (out unspecified) when the compiled loop is off or
    cannot take them."""
    if not enabled() or not hasattr(_module(), "dequantize_legacy"):
        return False
    if type_name not in LEGACY_TYPES or q.dtype != np.uint8 or out.dtype != F32:
        return False
    if not (_flat_layout(q) and _flat_layout(out) and out.flags.writeable):
        return False
    if np.may_share_memory(q, out):
        return False
    done: bool = _module().dequantize_legacy(type_name, _flat(q), _flat(out))
    return done


def _flat_layout(x: Array) -> bool:
    return bool(x.flags.c_contiguous and x.flags.aligned)


# GGUF K-quants -------------------------------------------------------------------------------


def quantize_gguf_k(kind: str, x: Array, out: Array) -> bool:
    """ggml's `kind` K-quant blocks of the float32 rows `x` into the uint8 rows `out`: True
    when written; False (out unspecified) when x holds an infinity or NaN, or the arrays are
    not ones the loop takes (the caller takes its numpy path, which refuses non-finite x)."""
    if not enabled() or not hasattr(_module(), "quantize_gguf_k"):
        return False
    if not (_flat_ok(x, F32) and _flat_ok(out, np.dtype(np.uint8))) or np.may_share_memory(x, out):
        return False
    done: bool = _module().quantize_gguf_k(kind, x, out)
    return done


def dequantize_gguf_k(kind: str, q: Array, out: Array) -> bool:
    """float32 values of ggml's `kind` K-quant blocks `q` into `out`; False when the caller
    must take its numpy path."""
    if not enabled() or not hasattr(_module(), "dequantize_gguf_k"):
        return False
    if not (_flat_ok(q, np.dtype(np.uint8)) and _flat_ok(out, F32)) or np.may_share_memory(q, out):
        return False
    _module().dequantize_gguf_k(kind, q, out)
    return True


def _flat_ok(a: Array, dtype: np.dtype[Any]) -> bool:
    """A C-contiguous aligned 2-D array of `dtype` (writable is checked by the buffer protocol)."""
    return a.dtype == dtype and a.ndim == 2 and a.flags.c_contiguous and a.flags.aligned
