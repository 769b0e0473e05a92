"""The compiled loops against careless callers and awkward memory: arrays that end right before
(or start right after) a page the process may not touch, so that a read or write out of bounds
faults at once; views that start a few bytes into a line, rows a whole number of lines apart or
not, reversed rows; every transpose and cast path (`transpose_path`, `use_avx512`, `use_f16c`);
and arguments of the wrong item size, which must be refused with an error naming them, never
read as the bits of other values.

Each placement is checked bit for bit against numpy and ml_dtypes, and every byte around the
output (the gaps between its rows too) must keep its fill.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.block_types import BLOCK_TYPES
from lazyparams.runtime import native

pytestmark = pytest.mark.skipif(
    not native.available() or not native._module().BLOCKED_TRANSPOSE,
    reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)",
)

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
WORD = {size: np.dtype(f"u{size}") for size in (1, 2, 4, 8)}
PAGE = mmap.PAGESIZE
PROT_NONE = 0  # mprotect's "no access"
FILL = 0xA5


class Guarded:
    """A region of whole pages between two pages that may not be touched (PROT_NONE)."""

    def __init__(self, nbytes: int) -> None:
        if not sys.platform.startswith(("linux", "darwin")):
            pytest.skip("guard pages need mprotect")
        self.size = max(-(-nbytes // PAGE), 1) * PAGE
        self.map = mmap.mmap(-1, self.size + 2 * PAGE)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        for at in (self.base, self.base + PAGE + self.size):
            assert libc.mprotect(at, PAGE, PROT_NONE) == 0, ctypes.get_errno()
        self.body = np.frombuffer(self.map, np.uint8, self.size, PAGE)
        self.body[:] = FILL

    def array(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        strides: tuple[int, ...],
        at_end: bool,
        gap: int,
    ) -> np.ndarray:
        """An array whose lowest byte lies `gap` bytes after the first guard (or whose highest
        lies `gap` bytes before the last), whatever the signs of its strides."""
        if 0 in shape:
            return np.ndarray(shape, dtype, self.body, gap, strides)
        low = sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0)
        high = (
            sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s > 0) + dtype.itemsize
        )
        first = self.size - gap - (high - low) if at_end else gap
        return np.ndarray(shape, dtype, self.body, first - low, strides)


class Regions:
    """The guarded regions of a test, unmapped by `release` (their arrays dropped first)."""

    def __init__(self) -> None:
        self.made: list[Guarded] = []

    def __call__(self, nbytes: int) -> Guarded:
        self.made.append(Guarded(nbytes))
        return self.made[-1]

    def release(self) -> None:
        while self.made:
            region = self.made.pop()
            del region.body
            region.map.close()


@pytest.fixture
def guarded() -> Iterator[Regions]:
    regions = Regions()
    yield regions
    regions.release()


Choose = Callable[[str, bool, bool], None]
"""Sets the transpose path, and whether the AVX-512 and AVX2 (F16C) loops are in use."""


@pytest.fixture
def paths() -> Iterator[Choose]:
    """Set the transpose path and the vector loops in use; restored after the test."""
    module = native._module()
    before = (module.transpose_path("auto"), module.use_avx512(True), module.use_f16c(True))

    def choose(path: str, avx512: bool, f16c: bool) -> None:
        module.transpose_path(path)
        module.use_f16c(f16c)
        module.use_avx512(avx512)

    yield choose
    module.transpose_path(before[0])
    module.use_f16c(before[2])
    module.use_avx512(before[1])


def _bits(rng: np.random.Generator, n: int, dtype: np.dtype[Any]) -> np.ndarray:
    """`n` bit patterns of `dtype`: random bits with special values sprinkled in (NaNs with
    payloads, infinities, subnormals, -0, the extremes, rounding boundaries), for float32 also
    values near the narrow formats' ranges; bfloat16 mostly in float16's normal range."""
    size = dtype.itemsize
    x: np.ndarray[Any, Any]
    if size == 4:
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-8, 6)).astype(np.float32)
        x = x.view(np.uint32)
        special = [
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0x7F800001,
            0xFFBFFFFF,
            0x7F802000,
            1,
            0x80000000,
            0x7F7FFFFF,
            0x00800000,
            0x477FF000,
            0x477FEFFF,
            0x33000001,
            0x43E00000,
            0x47600000,
            0x387FC000,
        ]
    elif size == 2 and dtype == BF16:
        x = rng.integers(0x3880, 0x4780, n, dtype=np.uint16) | np.uint16(0x8000 * rng.integers(2))
        special = [0x7FC1, 0xFF81, 0x7F80, 0x0001, 0x8000, 0x477F, 0x4780, 0x387F, 0x7FFF]
    else:
        x = rng.integers(0, 1 << (8 * size), n, dtype=np.uint64).astype(WORD[size])
        special = []
    if n and special:
        x[rng.integers(0, n, n // 8 + 1)] = rng.choice(np.array(special, x.dtype), n // 8 + 1)
    return x


def _table(src: np.dtype[Any], dst: np.dtype[Any]) -> np.ndarray:
    return native.pattern_table(src, dst).view(WORD[dst.itemsize])


# (kind, source dtype, target dtype): the transposes' conversions, a plain copy of each size
CONVERSIONS: list[tuple[str, np.dtype[Any], np.dtype[Any]]] = [
    *(("", WORD[s], WORD[s]) for s in (1, 2, 4, 8)),
    *((str(d), F32, d) for d in (F16, BF16, E4M3, E5M2)),
    ("bfloat16>float32", BF16, F32),
    ("bfloat16>float16", BF16, F16),
    ("float16>float32", F16, F32),
    ("float16>bfloat16", F16, BF16),
    ("float8_e4m3fn>float32", E4M3, F32),
    ("float8_e5m2>float32", E5M2, F32),
    *(("lookup", s, d) for s, d in ((F16, F64), (BF16, E4M3), (E4M3, F16), (E5M2, F64))),
]
SIDES = [0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 520]


def _transpose_case(rng: np.random.Generator, guarded: Regions, choose: Choose) -> None:
    kind, src_type, dst_type = CONVERSIONS[rng.integers(len(CONVERSIONS))]
    isz, osz = src_type.itemsize, dst_type.itemsize
    n, m = (int(rng.choice(SIDES)) for _ in range(2))
    if rng.random() < 0.4:  # whole output lines (the streamed strips), rows maybe one over
        n = (64 // osz) * int(rng.integers(1, 12)) + int(rng.choice([0, 0, 1]))
    ss = (m * isz + int(rng.choice([0, 0, isz, 64, 1]))) * int(rng.choice([1, 1, 1, -1]))
    ds = n * osz + int(rng.choice([0, 0, -(n * osz) % 64 + 64, osz, 48]))
    src = guarded(abs(ss) * n + PAGE).array(
        (n, m), WORD[isz], (ss, isz), rng.random() < 0.5, int(rng.choice([0, 0, 1, 8, 16, 48]))
    )
    region = guarded(ds * m + PAGE)
    dst = region.array(
        (m, n), WORD[osz], (ds, osz), rng.random() < 0.5, int(rng.choice([0, 0, 2, 8, 16, 32, 48]))
    )
    src[...] = _bits(rng, n * m, src_type).reshape(n, m)
    large = bool(rng.random() < 0.7)
    path, avx512, f16c = (
        str(rng.choice(["auto", "staged", "direct"])),
        rng.random() < 0.6,
        rng.random() < 0.85,
    )
    choose(path, avx512, f16c)
    lookup = kind == "lookup" or (kind.startswith("float8_") and ">" in kind)  # by a table
    table = (_table(src_type, dst_type),) if lookup else ()
    native._module().transpose2d(src, dst, large, kind, *table)
    with np.errstate(all="ignore"):
        want = src.T if not kind else src.view(src_type).T.astype(dst_type).view(WORD[osz])
    case = (
        f"{kind or 'copy'} {src_type}>{dst_type} ({n}, {m}) strides {ss}, {ds} path {path} "
        f"avx512 {avx512} f16c {f16c} large {large}"
    )
    bad = np.argwhere(dst != want)
    assert not bad.size, f"{case}: {bad.shape[0]} items differ, first at {bad[0].tolist()}"
    outside = region.body.copy()
    start = dst.__array_interface__["data"][0] - region.body.__array_interface__["data"][0]
    for j in range(m):
        outside[start + j * ds : start + j * ds + n * osz] = FILL
    assert np.all(outside == FILL), f"{case}: bytes outside the output were written"


def test_transposes_stay_in_bounds_and_exact_on_every_path(guarded: Regions, paths: Choose) -> None:
    """Random placements (seeded) of every conversion: every edge of the shapes (single rows
    and columns, primes, one under and over a line or a block), reversed and padded rows,
    inputs and outputs that start a few bytes into a line, output rows a whole number of lines
    apart (the streamed strips and the seams of adjacent rows) or not."""
    rng = np.random.default_rng(2026)
    for _ in range(1500):
        _transpose_case(rng, guarded, paths)
        guarded.release()


def _named(name: str) -> np.dtype[Any]:
    return np.dtype(getattr(ml_dtypes, name, None) or name)


# (function, kind, source dtype, target dtype): every direct cast, and lookups by a table
CASTS: list[tuple[str, str, np.dtype[Any], np.dtype[Any]]] = [
    *(("cast", str(d), F32, d) for d in (F16, BF16, E4M3, E5M2)),
    *(
        (f, k, _named(k.split(">")[0]), _named(k.split(">")[1]))
        for f, kinds in (
            ("cast16", native.CAST16_KINDS),
            ("cast64", native.CAST64_KINDS),
            ("cast8", native.CAST8_KINDS),
        )
        for k in kinds
    ),
    *(("lookup", "", s, d) for s, d in ((F16, F64), (E4M3, BF16), (BF16, E5M2), (E5M2, F16))),
]


def _cast_case(
    guarded: Regions,
    rng: np.random.Generator,
    n: int,
    case: tuple[str, str, np.dtype[Any], np.dtype[Any]],
) -> None:
    function, kind, src_type, dst_type = case
    gap_in, gap_out = (int(g) for g in rng.choice([0, 1, 2, 8, 16, 48], 2))
    gap_in -= gap_in % src_type.itemsize if rng.random() < 0.5 else 0
    x = guarded(n * 8 + PAGE).array(
        (n,), WORD[src_type.itemsize], (src_type.itemsize,), n % 2 == 0, gap_in
    )
    region = guarded(n * 8 + PAGE)
    out = region.array((n,), WORD[dst_type.itemsize], (dst_type.itemsize,), n % 3 == 0, gap_out)
    if src_type == F64:
        x[...] = native.float64_patterns()[rng.integers(0, 1 << 16, n)]
    else:
        x[...] = _bits(rng, n, src_type)
    module = native._module()
    if function == "lookup":
        module.lookup(x, out, _table(src_type, dst_type))
    elif function == "cast8":
        module.cast8(kind, x, out, _table(src_type, dst_type))
    else:
        getattr(module, function)(kind, x, out)
    with np.errstate(all="ignore"):
        want = x.view(src_type).astype(dst_type).view(out.dtype)
    bad = np.flatnonzero(out != want)
    assert not bad.size, f"n {n}: {bad.size} items differ, first at {bad[0]}"
    written = np.count_nonzero(region.body != FILL) - np.count_nonzero(out.view(np.uint8) != FILL)
    assert written == 0, f"n {n}: bytes outside the output were written"


@pytest.mark.parametrize("case", CASTS, ids=[f"{f}-{s}>{d}" for f, _, s, d in CASTS])
def test_casts_stay_in_bounds_and_exact_on_every_path(
    guarded: Regions, paths: Choose, case: tuple[str, str, np.dtype[Any], np.dtype[Any]]
) -> None:
    """Each cast over lengths around its vector widths, input and output at either guard,
    starting 0 to 48 bytes into a line, by the AVX-512, AVX2 and portable loops."""
    rng = np.random.default_rng(len(case[1]) + 7 * case[2].itemsize + case[3].itemsize)
    for n in (0, 1, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 1000):
        for avx512, f16c in ((True, True), (False, True), (False, False)):
            paths("auto", avx512, f16c)
            try:
                _cast_case(guarded, rng, n, case)
            except AssertionError as error:
                raise AssertionError(f"{case[:2]} avx512 {avx512} f16c {f16c}: {error}") from None
            guarded.release()


# Arguments of the wrong item size -------------------------------------------------------------


def _int8_args(x: np.ndarray, q: np.ndarray, scale: np.ndarray) -> tuple[Any, ...]:
    return (x, "float32", None, 1, 2, 4, q, scale)


def _int4_args(x: np.ndarray, packed: np.ndarray, scale: np.ndarray) -> tuple[Any, ...]:
    return (x, "float32", None, 2, 4, 2, packed, scale)


WRONG_ITEMS: list[tuple[str, str, Callable[[], tuple[Any, ...]]]] = [
    # float64 values of float32's byte count, which were read as pairs of float32 bits
    ("quantize_gguf_k", "x", lambda: ("q4_k", np.ones(128, F64), np.zeros(144, np.uint8))),
    ("quantize_gguf_k", "out", lambda: ("q4_k", np.ones(256, F32), np.zeros(72, np.uint16))),
    ("dequantize_gguf_k", "out", lambda: ("q4_k", np.zeros(144, np.uint8), np.zeros(128, F64))),
    ("dequantize_gguf_k", "q", lambda: ("q4_k", np.zeros(36, np.uint32), np.zeros(256, F32))),
    (
        "quantize_int8",
        "x",
        lambda: _int8_args(np.ones(4, F64), np.zeros(8, np.int8), np.zeros(2, F32)),
    ),
    (
        "quantize_int8",
        "q",
        lambda: _int8_args(np.ones(8, F32), np.zeros(4, np.int16), np.zeros(2, F32)),
    ),
    (
        "quantize_int8",
        "scale",
        lambda: _int8_args(np.ones(8, F32), np.zeros(8, np.int8), np.zeros(1, F64)),
    ),
    (
        "quantize_int4",
        "x",
        lambda: _int4_args(np.ones(4, F64), np.zeros(4, np.uint8), np.zeros(4, F32)),
    ),
    (
        "quantize_int4",
        "packed",
        lambda: _int4_args(np.ones(8, F32), np.zeros(1, np.uint32), np.zeros(4, F32)),
    ),
    (
        "quantize_int4",
        "scale",
        lambda: _int4_args(np.ones(8, F32), np.zeros(4, np.uint8), np.zeros(2, F64)),
    ),
    ("quantize_legacy", "out", lambda: ("q4_0", np.ones(32, F32), np.zeros(9, np.uint16))),
    ("dequantize_legacy", "out", lambda: ("q4_0", np.zeros(18, np.uint8), np.zeros(16, F64))),
]


@pytest.mark.parametrize(
    ("name", "culprit", "arguments"), WRONG_ITEMS, ids=[f"{n}-{c}" for n, c, _ in WRONG_ITEMS]
)
def test_buffers_of_the_wrong_item_size_are_refused(
    name: str, culprit: str, arguments: Callable[[], tuple[Any, ...]]
) -> None:
    """A buffer of the right byte count but other items is a ValueError naming it (it was
    read, or written, as the bits of other values), and every buffer is released."""
    args = arguments()
    with pytest.raises(ValueError, match=rf"expected {culprit} of \d+-byte items"):
        getattr(native._module(), name)(*args)
    for arg in args:
        if isinstance(arg, np.ndarray):
            arg.resize(arg.size + 1, refcheck=False)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


NOT_BUFFERS: list[tuple[str, str, type[Exception], Callable[[], tuple[Any, ...]]]] = [
    ("cast", "x", TypeError, lambda: ("float16", [1.0], np.zeros(1, np.uint16))),
    (
        "cast",
        "out",
        ValueError,
        lambda: ("float16", np.zeros(4, np.uint32), _read_only(np.zeros(4, np.uint16))),
    ),
    (
        "cast8",
        "table",
        TypeError,
        lambda: ("float8_e4m3fn>float32", np.zeros(4, np.uint8), np.zeros(4, np.uint32), None),
    ),
    (
        "transpose2d",
        "dst",
        ValueError,
        lambda: (np.zeros((2, 3), np.uint16), _read_only(np.zeros((3, 2), np.uint16)), False),
    ),
    (
        "quantize_int8",
        "table",
        TypeError,
        lambda: (
            np.zeros(8, np.uint16),
            "float16",
            None,
            1,
            2,
            4,
            np.zeros(8, np.int8),
            np.zeros(2, F32),
        ),
    ),
    (
        "quantize_gguf_k",
        "x",
        ValueError,
        lambda: ("q2_k", np.zeros(512, F32)[::2], np.zeros(84, np.uint8)),
    ),
    ("dequantize_gguf_k", "q", TypeError, lambda: ("q2_k", None, np.zeros(256, F32))),
]


@pytest.mark.parametrize(
    ("name", "culprit", "error", "arguments"),
    NOT_BUFFERS,
    ids=[f"{n}-{c}" for n, c, _, _ in NOT_BUFFERS],
)
def test_arguments_without_the_buffer_asked_for_are_named(
    name: str, culprit: str, error: type[Exception], arguments: Callable[[], tuple[Any, ...]]
) -> None:
    """Not a buffer, read-only where written, not contiguous where it must be: the buffer
    protocol's error, of its type, names the argument."""
    with pytest.raises(error, match=rf"^expected {culprit} as a .*buffer \("):
        getattr(native._module(), name)(*arguments())


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_array_subclasses_are_flattened_as_plain_arrays() -> None:
    """np.matrix keeps two dimensions through reshape(-1): the wrappers flattened it so and
    the extension's rank check leaked out of fast.cast and the legacy quantizer as a
    ValueError; they now run on its plain ndarray view."""
    x = np.matrix(np.arange(-3, 3, dtype=F32).reshape(2, 3) / 7)
    out = np.empty((2, 3), F16)
    assert native.cast(x, out)
    assert np.array_equal(out.view(np.uint16), np.asarray(x).astype(F16).view(np.uint16))
    from lazyparams.runtime import native_gguf

    rows, blocks = np.matrix(np.ones((2, 64), F32)), np.zeros((2, 36), np.uint8)
    assert native_gguf.quantize_legacy("q4_0", rows, blocks) == -1
    want = np.zeros_like(blocks)
    assert native_gguf.quantize_legacy("q4_0", np.asarray(rows), want) == -1
    assert np.array_equal(blocks, want)


@pytest.mark.parametrize("large", [False, True])
def test_an_empty_transpose_of_many_rows_returns_at_once(large: bool) -> None:
    """An (n, 0) src holds no bytes whatever n is, but the strips stepped over all its rows:
    10**10 of them took over a second, 10**12 minutes. Bad arguments are still refused."""
    import time

    n = 10**12
    src, dst = np.empty((n, 0), np.uint16), np.empty((0, n), np.uint16)
    start = time.perf_counter()
    native._module().transpose2d(src, dst, large)
    native._module().transpose2d(dst, src, large)
    assert time.perf_counter() - start < 0.5
    with pytest.raises(ValueError, match="conversion kind"):
        native._module().transpose2d(src, dst, large, "float16")


# Misaligned buffers given to the quantizers ----------------------------------------------------


def _shifted(array: np.ndarray, by: int) -> np.ndarray:
    """A writable copy of `array` whose data starts `by` bytes past an aligned address."""
    raw = np.zeros(array.nbytes + 16, np.uint8)
    start = -raw.ctypes.data % 16 + by
    view = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return view


def _quantizer_calls() -> Iterator[tuple[str, Callable[[int], bytes]]]:
    """(name, run at a byte shift -> the output's bytes) for every compiled quantizer and
    dequantizer, called directly: the wrappers take aligned buffers only, the C any."""
    module = native._module()
    weights = np.random.default_rng(3).normal(0, 0.02, (4, 512)).astype(np.float32)
    for kind in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        size = BLOCK_TYPES[kind].type_size

        def legacy(by: int, kind: str = kind, size: int = size) -> bytes:
            x, out = _shifted(weights, by), _shifted(np.zeros((4, 16 * size), np.uint8), by)
            assert module.quantize_legacy(kind, x.reshape(-1), out.reshape(-1), "") == -1
            back = _shifted(np.zeros(weights.shape, np.float32), by)
            assert module.dequantize_legacy(kind, out.reshape(-1), back.reshape(-1))
            return out.tobytes() + back.tobytes()

        yield kind, legacy
    for kind in ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k"):
        size = BLOCK_TYPES[kind].type_size

        def k_quant(by: int, kind: str = kind, size: int = size) -> bytes:
            x, out = _shifted(weights, by), _shifted(np.zeros((4, 2 * size), np.uint8), by)
            assert module.quantize_gguf_k(kind, x, out)
            back = _shifted(np.zeros(weights.shape, np.float32), by)
            module.dequantize_gguf_k(kind, out, back)
            return out.tobytes() + back.tobytes()

        yield kind, k_quant

    def int8(by: int) -> bytes:
        x = _shifted(weights.reshape(1, 4, 512), by)
        q, scale = _shifted(np.zeros((1, 4, 512), np.int8), by), np.zeros(4, np.float32)
        assert module.quantize_int8(x.view(np.uint32), "float32", None, 1, 4, 512, q, scale)
        return q.tobytes() + scale.tobytes()

    def int4(by: int) -> bytes:
        x = _shifted(weights, by)
        packed, scale = _shifted(np.zeros((4, 256), np.uint8), by), np.zeros((4, 16), np.float32)
        assert module.quantize_int4(x.view(np.uint32), "float32", None, 4, 512, 32, packed, scale)
        return packed.tobytes() + scale.tobytes()

    yield "int8", int8
    yield "int4", int4


QUANTIZER_CALLS = dict(_quantizer_calls()) if native.available() else {}


@pytest.mark.parametrize("name", list(QUANTIZER_CALLS))
def test_quantizers_give_the_same_bytes_at_any_address(name: str) -> None:
    run = QUANTIZER_CALLS[name]
    aligned = run(0)
    for by in (1, 2, 3):
        assert run(by) == aligned, (name, by)
