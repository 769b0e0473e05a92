"""The registry of GGML block kernels, and the kernels of `quantize_gguf` / `dequantize_gguf`.

`QUANTIZE[type](x)` takes finite float32 rows (rows, n) and gives their uint8 blocks
(rows, n / block * type size); `DEQUANTIZE[type](q, n)` gives those rows back as float32. The
legacy types come from `runtime.gguf_legacy`, the K-quants from `runtime.gguf_kquants`, and
every other block type gguf-py reads is dequantized by `gguf.quants`. The op kernels run a
chunk of whole blocks at a time (blocks are independent), so their temporaries stay small; a
NaN or infinity to quantize is refused (ggml's reference gives meaningless bytes for it), with
its position. Imports numpy, gguf and the runtime's registries.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lazyparams.block_types import BLOCK_TYPES, BlockType
from lazyparams.errors import RuntimeExecError
from lazyparams.ir.dtype import to_numpy
from lazyparams.runtime import fast, gguf_kquants, gguf_legacy, native, native_gguf
from lazyparams.runtime.kernels import Array, kernel
from lazyparams.runtime.pool import BUFFERS

Quantizer = Callable[[Array], Array]
Dequantizer = Callable[[Array, int], Array]


def _legacy_quantizer(type_name: str) -> Quantizer:
    return functools.partial(gguf_legacy.quantize_rows, type_name)


def _legacy_dequantizer(type_name: str) -> Dequantizer:
    return functools.partial(gguf_legacy.dequantize_rows, type_name)


def _gguf_dequantizer(block: BlockType) -> Dequantizer:
    """gguf-py's dequantization of `block`'s rows, as float32 (rows, n)."""

    def dequantize(q: Array, n: int) -> Array:
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize as gguf_dequantize

        values = gguf_dequantize(np.ascontiguousarray(q), GGMLQuantizationType(block.ggml_id))
        return np.asarray(values, np.float32).reshape(q.shape[0], n)

    return dequantize


QUANTIZE: dict[str, Quantizer] = {
    **{name: _legacy_quantizer(name) for name in gguf_legacy.TYPES},
    **gguf_kquants.QUANTIZE,
}
"""Block type -> quantizer of float32 rows."""

DEQUANTIZE: dict[str, Dequantizer] = {
    **{name: _gguf_dequantizer(block) for name, block in BLOCK_TYPES.items()},
    **{name: _legacy_dequantizer(name) for name in gguf_legacy.TYPES},
    **gguf_kquants.DEQUANTIZE,
}
"""Block type -> dequantizer of block rows to float32."""


def _pieces(values: int, block: BlockType, whole: bool = False) -> int:
    """Values per chunk: whole blocks, about `fast.CHUNK` values; all of them in one piece
    when `whole` (a compiled loop that needs no temporaries)."""
    if whole:
        return max(values, 1)
    return max(1, fast.CHUNK // block.block_size) * block.block_size if values else 1


def _compiled_legacy(type_name: str, dtype: np.dtype[Any]) -> bool:
    """Whether the compiled legacy loops of `type_name` read `dtype` directly (float32, and
    the 16-bit floats they convert as they go)."""
    if not native.enabled() or type_name not in gguf_legacy.TYPES:
        return False
    return native_gguf.legacy_source_kind(dtype) is not None


def _refuse_non_finite(chunk: Array, first: int, type_name: str) -> None:
    """Refuse a NaN or infinity in `chunk` (flat, starting at index `first` of the tensor)."""
    if bool(np.isfinite(chunk).all()):
        return
    bad = int(np.flatnonzero(~np.isfinite(chunk))[0])
    raise RuntimeExecError(
        f"expected finite values to quantize to {type_name}, got {chunk[bad]} at flat index "
        f"{first + bad}; NaN and infinity have no GGML block encoding"
    )


def quantize_into(x: Array, type_name: str, out: Array) -> None:
    """Quantize the float array `x` (last dim whole blocks) into `out`, its uint8 blocks."""
    block, quantizer = BLOCK_TYPES[type_name], QUANTIZE.get(type_name)
    if quantizer is None:
        raise RuntimeExecError(f"expected a block type with a quantizer, got {type_name}")
    flat, dest = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
    legacy = type_name in gguf_legacy.TYPES  # writes in place and refuses NaN itself
    whole = _compiled_legacy(type_name, flat.dtype)  # reads float32 and 16-bit floats itself
    step = _pieces(flat.size, block, whole)
    direct = whole or flat.dtype == np.float32
    scratch = None if direct else np.empty(min(step, flat.size), np.float32)
    for first in range(0, flat.size, step):
        chunk = flat[first : first + step]
        if scratch is not None:  # one float32 buffer for every chunk, filled by the fast cast
            fast.cast_into(chunk, scratch[: chunk.size])
            chunk = scratch[: chunk.size]
        wide = chunk.reshape(1, -1)
        at = block.row_bytes(first)
        target = dest[at : at + block.row_bytes(wide.size)].reshape(1, -1)
        if legacy:
            gguf_legacy.quantize_rows_into(type_name, wide, target, first)
        else:
            _refuse_non_finite(wide.reshape(-1), first, type_name)
            target[...] = quantizer(wide)


def dequantize_into(q: Array, type_name: str, out: Array) -> None:
    """The values of the uint8 blocks `q` of `type_name`, cast into the float array `out`."""
    block, dequantizer = BLOCK_TYPES[type_name], DEQUANTIZE[type_name]
    src, dest = np.ascontiguousarray(q).reshape(-1), out.reshape(-1)
    if _compiled_legacy(type_name, dest.dtype) and native_gguf.dequantize_legacy(
        type_name, src, dest
    ):
        return
    step = _pieces(dest.size, block)
    for first in range(0, dest.size, step):
        count = min(step, dest.size - first)
        at = block.row_bytes(first)
        raw = src[at : at + block.row_bytes(count)].reshape(1, -1)
        fast.cast_into(dequantizer(raw, count).reshape(-1), dest[first : first + count])


def _checked_blocks(shape: tuple[int, ...], type_name: str, what: str) -> BlockType:
    block = BLOCK_TYPES.get(type_name)
    if block is None:
        raise RuntimeExecError(f"expected a GGML block type, got {type_name!r}")
    if not shape or shape[-1] % block.block_size:
        raise RuntimeExecError(
            f"expected {what} whose last dim is a multiple of {block.block_size} "
            f"({type_name} blocks), got shape {shape}"
        )
    return block


@kernel("quantize_gguf")
def _quantize_gguf(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    x = np.asarray(ops[0])
    if x.dtype.kind != "f" and x.dtype not in native.SMALL_FLOATS:
        raise RuntimeExecError(f"expected x of a float dtype, got {x.dtype}")
    block = _checked_blocks(x.shape, attrs["type"], "x")
    out = BUFFERS.empty(block.storage_shape(x.shape), np.uint8)
    quantize_into(x, attrs["type"], out)
    return out


@kernel("dequantize_gguf")
def _dequantize_gguf(ops: Sequence[Any], attrs: Mapping[str, Any]) -> Array:
    q, type_name = np.asarray(ops[0]), attrs["type"]
    block = BLOCK_TYPES.get(type_name)
    if block is None or q.dtype != np.uint8 or not q.shape or q.shape[-1] % block.type_size:
        size = "?" if block is None else block.type_size
        raise RuntimeExecError(
            f"expected q as uint8 rows of {type_name} blocks ({size} bytes each), "
            f"got {q.dtype} of shape {q.shape}"
        )
    out = BUFFERS.empty(block.logical_shape(q.shape), to_numpy(attrs.get("dtype") or "float32"))
    dequantize_into(q, type_name, out)
    return out
