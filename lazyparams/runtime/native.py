"""The compiled loops of `runtime/csrc/` (the `_native` extension), behind checked wrappers that
say whether they ran.

Each wrapper takes numpy arrays, checks that the compiled loop handles them (dtype, layout,
alignment, no overlap between input and output) and returns True when it wrote the result, or
False when the caller must take its numpy path: so `runtime.fast` and `runtime.quant` work the
same with or without the extension, bit for bit. The extension is optional (the package installs
without a C compiler); `LAZYPARAMS_NATIVE=0` in the environment turns it off. The loops
release the GIL. Imports numpy and ml_dtypes only.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import ml_dtypes
import numpy as np

Array = np.ndarray[Any, Any]

# The float dtypes the compiled loops know, for `runtime.fast` too.
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOAT8 = (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))
SMALL_FLOATS = (F16, BF16, *FLOAT8)
FLOATS = (np.dtype(np.float64), F32, *SMALL_FLOATS)
_BY_NAME = {str(d): d for d in FLOATS}
_WORD: dict[int, np.dtype[Any]] = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}
"""The unsigned integer dtype of each item size: the extension sees bits, never dtypes."""


def _load() -> ModuleType | None:
    if os.environ.get("LAZYPARAMS_NATIVE", "1") == "0":
        return None
    try:
        from lazyparams.runtime import _native
    except ImportError:
        return None
    module: ModuleType = _native
    return module


_MODULE = _load()
_enabled = _MODULE is not None


def _numpy_keeps_nan_payloads() -> bool:
    """Whether this numpy converts float32 NaNs to float16 as the extension does (payload kept,
    not quieted): numpy builds that convert in hardware quiet them, and then the extension's
    float16 cast is declined."""
    signalling = np.array([0x7F802000, 0x7F800001], np.uint32).view(F32)
    with np.errstate(all="ignore"):
        halves: list[int] = signalling.astype(F16).view(np.uint16).tolist()
    return halves == [0x7C01, 0x7C01]


_HALF_CAST = _numpy_keeps_nan_payloads()


def available() -> bool:
    """Whether the compiled extension was built and loaded (whatever `use_native` says)."""
    return _MODULE is not None


def enabled() -> bool:
    """Whether the compiled loops are in use now."""
    return _enabled and _MODULE is not None


@contextlib.contextmanager
def use_native(on: bool) -> Iterator[None]:
    """Use the compiled loops (when built) or only the numpy ones, inside the block: for tests
    and benchmarks that compare both paths. The switch is process-wide, not per thread."""
    global _enabled
    before, _enabled = _enabled, on
    try:
        yield
    finally:
        _enabled = before


def _words(x: Array) -> Array:
    """`x` viewed as unsigned words of its item size: the extension sees bits, never dtypes
    (numpy cannot describe bfloat16 or float8 in a buffer)."""
    return x.view(_WORD[x.itemsize])


def _flat(x: Array) -> Array:
    """The elements of the C-contiguous `x` as a 1-D view: a plain ndarray first, since
    subclasses such as np.matrix keep two dimensions through reshape(-1)."""
    return np.asarray(x).reshape(-1)


def _flat_pair(x: Array, out: Array) -> bool:
    """Same-shaped, contiguous, aligned, separate arrays, the output writable."""
    contiguous = x.flags.c_contiguous and out.flags.c_contiguous
    aligned = x.flags.aligned and out.flags.aligned and out.flags.writeable
    return x.shape == out.shape and contiguous and aligned and not np.may_share_memory(x, out)


# Transposes ----------------------------------------------------------------------------------


STREAM_BYTES = 8 << 20
"""Transposes writing this much or more (in all their planes) stream their output around the
cache: it could not stay there anyway."""


def transpose_2d(src: Array, dst: Array, total_bytes: int | None = None) -> bool:
    """`dst[j, i] = src[i, j]` for 2-D arrays whose last axes are contiguous. `total_bytes`
    is the whole output when dst is one plane of it (it decides the streaming)."""
    if not enabled() or not _module().BLOCKED_TRANSPOSE or src.dtype != dst.dtype:
        return False
    if not _transposable(src, dst):
        return False
    if src.size == 0:
        return True  # nothing to write
    large = (dst.nbytes if total_bytes is None else total_bytes) >= STREAM_BYTES
    _module().transpose2d(_words(src), _words(dst), large)
    return True


def _transposable(src: Array, dst: Array) -> bool:
    """2-D arrays of word-sized items, dst of src's transposed shape, apart, aligned, dst
    writable, each with its last axis contiguous."""
    if src.ndim != 2 or dst.shape != src.shape[::-1] or np.may_share_memory(src, dst):
        return False
    if src.itemsize not in _WORD or dst.itemsize not in _WORD:
        return False
    if src.dtype.hasobject or dst.dtype.hasobject or not dst.flags.writeable:
        return False
    if not (src.flags.aligned and dst.flags.aligned):
        return False
    if src.size == 0:
        return True
    return src.strides[1] == src.itemsize and dst.strides[1] == dst.itemsize


# Casts ---------------------------------------------------------------------------------------


def cast(x: Array, out: Array) -> bool:
    """`out[...] = x.astype(out.dtype)` for the conversions the extension does bit-exactly:
    float32 and float64 to float16, bfloat16 and float8; the 16-bit floats to each other and to
    float32 directly (no float32 stage between them); and any 1- or 2-byte float to any float
    by a table of every bit pattern (but bfloat16 to float64)."""
    if not enabled() or not _flat_pair(x, out):
        return False
    found = conversion(x.dtype, out.dtype) or _from_float64(x.dtype, out.dtype)
    if found is None:
        return False
    kind, table = found
    flat_x, flat_out = _words(_flat(x)), _words(_flat(out))
    if kind in CAST64_KINDS:
        _module().cast64(kind, flat_x, flat_out)
    elif kind in CAST16_KINDS:
        _module().cast16(kind, flat_x, flat_out)
    elif kind in CAST8_KINDS:
        _module().cast8(kind, flat_x, flat_out, table)
    elif table is not None:
        _module().lookup(flat_x, flat_out, table)
    else:
        _module().cast(kind, flat_x, flat_out)
    return True


@functools.cache  # per pair of dtypes: a cast of many chunks asks once a chunk
def conversion(src: np.dtype[Any], dst: np.dtype[Any]) -> tuple[str, Array | None] | None:
    """The compiled conversion from `src` to `dst` that gives numpy's (and ml_dtypes') bits:
    its kind (a `cast` or `cast16` kind, or 'lookup') and, for a lookup, the table; None
    where the extension has none (numpy's own cast is as fast or the only exact one)."""
    if src == F32 and (dst in (BF16, *FLOAT8) or (dst == F16 and _HALF_CAST)):
        return str(dst), None
    kind = f"{src}>{dst}"
    if kind in CAST16_KINDS and _cast16_agrees(kind):
        return kind, None
    if kind in CAST8_KINDS and _cast8_agrees(kind):
        return kind, pattern_table(src, dst).view(_WORD[dst.itemsize])
    # bfloat16 to float64 is a shift and a widening, which numpy's own cast does at copy speed
    wide_bfloat = src == BF16 and dst.itemsize >= 4
    if src in SMALL_FLOATS and dst in FLOATS and dst != src and not wide_bfloat:
        return "lookup", pattern_table(src, dst).view(_WORD[dst.itemsize])
    return None


def transpose_cast_2d(src: Array, dst: Array, total_bytes: int | None = None) -> bool:
    """`dst[j, i] = src[i, j].astype(dst.dtype)` for 2-D arrays whose last axes are contiguous,
    converting each tile as the transpose gathers it (one pass over the bytes); False where
    the extension has no such conversion or cannot take the arrays."""
    if not enabled() or not _module().BLOCKED_TRANSPOSE or src.dtype == dst.dtype:
        return False
    found = transpose_conversion(src.dtype, dst.dtype)
    if found is None or not _transposable(src, dst):
        return False
    if src.size:
        large = (dst.nbytes if total_bytes is None else total_bytes) >= STREAM_BYTES
        _module().transpose2d(_words(src), _words(dst), large, *found)
    return True


def transpose_conversion(src: np.dtype[Any], dst: np.dtype[Any]) -> tuple[str, Array | None] | None:
    """`conversion`'s kind where the transposes have it, else the lookup by its table."""
    found = conversion(src, dst)
    if found is None or found[0] in CONVERT_KINDS or src == F32:
        return found
    return "lookup", pattern_table(src, dst).view(_WORD[dst.itemsize])


CAST16_KINDS = (
    "bfloat16>float32",
    "bfloat16>float16",
    "float16>float32",
    "float16>bfloat16",
    "bfloat16>float8_e4m3fn",
    "bfloat16>float8_e5m2",
    "float16>float8_e4m3fn",
    "float16>float8_e5m2",
    "float16>float64",
)
"""The direct casts of the extension's `cast16`: between the 16-bit floats, to float32, to
both float8 formats, and float16 to float64."""


CAST8_KINDS = (
    "float8_e4m3fn>float32",
    "float8_e5m2>float32",
    "float8_e4m3fn>float16",
    "float8_e5m2>float16",
    "float8_e4m3fn>bfloat16",
    "float8_e5m2>bfloat16",
    "float8_e4m3fn>float8_e5m2",
    "float8_e5m2>float8_e4m3fn",
)
"""The float8 casts of the extension's `cast8`: to float32, to both 16-bit floats and to the
other float8, computed or looked up in registers (its table gives the codes' bits in the
target, for NaNs and those lookups)."""

CONVERT_KINDS = (*CAST16_KINDS[:4], *CAST8_KINDS[:2], "lookup")
"""The kinds the compiled transposes convert by as they gather a tile (with float32's targets
by name): the other direct casts run there by their table."""


CAST64_KINDS = (
    "float64>float16",
    "float64>bfloat16",
    "float64>float8_e4m3fn",
    "float64>float8_e5m2",
)
"""The casts of the extension's `cast64`: float64 to the 16-bit floats and to float8 (not in
`conversion`: the transposes do not convert from float64)."""


@functools.cache
def _from_float64(src: np.dtype[Any], dst: np.dtype[Any]) -> tuple[str, None] | None:
    """The compiled cast from float64 to `dst`, where it gives this numpy's and ml_dtypes'
    bits on `float64_patterns` (checked once, on first use); None elsewhere."""
    kind = f"{src}>{dst}"
    if kind not in CAST64_KINDS or not hasattr(_module(), "cast64"):
        return None
    x = float64_patterns()
    got = np.empty(x.shape, _WORD[dst.itemsize])
    _module().cast64(kind, x, got)
    with np.errstate(all="ignore"):
        want = x.view(np.float64).astype(dst).view(got.dtype)
    return (kind, None) if np.array_equal(got, want) else None


@functools.cache
def float64_patterns() -> Array:
    """float64 bits (uint64) that tell a cast to a narrower float right from wrong: every
    exponent, each with mantissas that are zero, one, all ones, and just below, at and above
    the halfway point of every rounding position; NaNs of several payloads; both signs; then
    random bits and random values near the 16-bit and 8-bit floats' ranges."""
    exps = np.arange(2048, dtype=np.uint64) << np.uint64(52)
    bit = np.uint64(1) << np.arange(52, dtype=np.uint64)
    ends = np.array([0, 1, (1 << 52) - 1], np.uint64)
    mans = np.concatenate([ends, bit, bit - np.uint64(1), bit + np.uint64(1)])
    mans = np.concatenate([mans, mans | bit[-1], mans | (np.uint64(3) << np.uint64(50))])
    mans &= np.uint64((1 << 52) - 1)
    grid = (exps[:, None] | mans[None, :]).reshape(-1)
    rng = np.random.default_rng(17)
    near = rng.integers(1023 - 160, 1023 + 160, 1 << 16).astype(np.uint64) << np.uint64(52)
    near |= rng.integers(0, 1 << 52, near.size, dtype=np.int64).astype(np.uint64)
    noise = rng.integers(0, 1 << 63, 1 << 14, dtype=np.int64).astype(np.uint64)
    x = np.concatenate([grid, near, noise])
    return np.concatenate([x, x | np.uint64(1 << 63)])


@functools.cache
def _cast8_agrees(kind: str) -> bool:
    """Whether the compiled float8 `kind` cast gives ml_dtypes' bits on all 256 codes (its
    NaN rules have changed between releases): checked once, on first use; where it does not,
    the table lookup does the work."""
    if not hasattr(_module(), "cast8"):
        return False
    src, dst = (_BY_NAME[name] for name in kind.split(">"))
    table = pattern_table(src, dst).view(_WORD[dst.itemsize])
    codes = np.arange(256 + 7, dtype=np.uint32).astype(np.uint8)  # vector loops and a tail
    got = np.empty(codes.shape, table.dtype)
    _module().cast8(kind, codes, got, table)
    return bool(np.array_equal(got, table[codes]))


@functools.cache
def _cast16_agrees(kind: str) -> bool:
    """Whether the compiled `kind` cast gives this numpy's and ml_dtypes' bits on every 16-bit
    pattern (their NaN rules have changed between releases): checked once, on first use; where
    it does not, the table lookup (made by their own cast) does the work."""
    if not hasattr(_module(), "cast16"):
        return False
    src, dst = (_BY_NAME[name] for name in kind.split(">"))
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got = np.empty(patterns.shape, _WORD[dst.itemsize])
    _module().cast16(kind, patterns, got)
    with np.errstate(all="ignore"):
        want = patterns.view(src).astype(dst).view(got.dtype)
    return bool(np.array_equal(got, want))


@functools.cache
def pattern_table(src: np.dtype[Any], dst: np.dtype[Any]) -> Array:
    """`dst` value of every bit pattern of the 1- or 2-byte dtype `src`, by its own cast."""
    patterns = np.arange(1 << (8 * src.itemsize), dtype=np.uint32)
    with np.errstate(all="ignore"):
        return patterns.astype(_WORD[src.itemsize]).view(src).astype(dst)


# Quantization --------------------------------------------------------------------------------


def _source(x: Array) -> tuple[Array, str, Array | None] | None:
    """`x` as the extension reads it: its words, their format, and the float32 value of each
    code where it needs one (float8, and float16 on CPUs without F16C); None for dtypes it
    does not read."""
    if not (x.flags.c_contiguous and x.flags.aligned):
        return None
    if x.dtype in (F32, BF16):
        return _words(x), str(x.dtype), None
    if x.dtype in SMALL_FLOATS:
        name = "float16" if x.dtype == F16 else "table"
        return _words(x), name, pattern_table(x.dtype, F32)
    return None


def quantize_int8(x3: Array, q3: Array, scale: Array) -> bool:
    """int8 codes of the (outer, channels, inner) `x3` per channel into `q3` and `scale`;
    False (outputs unspecified) when x3 holds an infinity or NaN, or a dtype it cannot read."""
    source = _source(x3) if enabled() and x3.ndim == 3 and x3.size else None
    if source is None or not _outputs(x3, q3, np.int8, scale):
        return False
    outer, channels, inner = x3.shape
    done: bool = _module().quantize_int8(*source, outer, channels, inner, q3, scale)
    return done


def quantize_int4(x: Array, group_size: int, packed: Array, scale: Array) -> bool:
    """int4 codes of the 2-D `x` by groups along rows, packed two a byte, and their scales;
    False (outputs unspecified) when x holds an infinity or NaN, or a dtype it cannot read."""
    source = _source(x) if enabled() and x.ndim == 2 and x.size else None
    if source is None or not _outputs(x, packed, np.uint8, scale):
        return False
    done: bool = _module().quantize_int4(*source, *x.shape, group_size, packed, scale)
    return done


def _outputs(x: Array, codes: Array, code_type: type[Any], scale: Array) -> bool:
    """Whether the extension can write these outputs of `x`: contiguous codes of `code_type`
    and aligned float32 scales, writable and apart from x and each other (the caller checked
    their shapes)."""
    contiguous = codes.flags.c_contiguous and scale.flags.c_contiguous
    writeable = codes.flags.writeable and scale.flags.writeable and scale.flags.aligned
    apart = not any(np.may_share_memory(a, b) for a, b in ((x, codes), (x, scale), (codes, scale)))
    return contiguous and writeable and apart and codes.dtype == code_type and scale.dtype == F32


def _module() -> Any:
    assert _MODULE is not None
    return _MODULE
