"""The compiled loops of `runtime/csrc/` (through `runtime/native.py`) bit for bit against
numpy, ml_dtypes and the numpy paths of `runtime.fast` and `runtime.quant`.

Every comparison is of raw bits. Each test first checks that the compiled loop really ran (its
wrapper returned True, or a spy saw it do the work), so that a loop that silently declines and
leaves the work to numpy cannot pass for a correct one. The declining cases check that the
wrapper returns False and leaves its output alone, and that the callers still get numpy's bits.
Without the extension every test is skipped but `test_extension_is_built_when_required`, which
fails instead where `LAZYPARAMS_REQUIRE_NATIVE=1` (as in CI).
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.runtime import fast, native, quant, run_kernel

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
NARROW = [F16, BF16, E4M3, E5M2]

native_only = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)


@pytest.fixture(autouse=True)
def _native_on() -> Iterator[None]:
    """Every test starts with the compiled loops switched on (where they are built)."""
    with native.use_native(True):
        yield


def _bits(a: np.ndarray) -> np.ndarray:
    """`a`'s bits as unsigned words of its item size (bytes for 16-byte items)."""
    return a.view(f"u{a.itemsize}" if a.itemsize <= 8 else np.uint8)


def _hex(values: np.ndarray) -> list[str]:
    return [hex(int(v)) for v in values]


def _same_bits(got: np.ndarray, want: np.ndarray, inputs: np.ndarray | None = None) -> None:
    """Bit-identical arrays; a failure names the first differing elements (and their inputs)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    g, w = _bits(got).reshape(-1), _bits(want).reshape(-1)
    bad = np.flatnonzero(g != w)[:8]
    if bad.size:
        where = "" if inputs is None else f" for inputs {_hex(_bits(inputs).reshape(-1)[bad])}"
        raise AssertionError(
            f"{np.count_nonzero(g != w)} of {g.size} elements differ, first at {bad.tolist()}"
            f"{where}: got {_hex(g[bad])}, want {_hex(w[bad])}"
        )


def _same_nan_aware(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, except that any NaN matches any NaN."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        nan = np.isnan(got)
        np.testing.assert_array_equal(nan, np.isnan(want))
        got, want = got[~nan], want[~nan]
    _same_bits(got, want)


def _astype(x: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def _random(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Random bit patterns (NaNs included) of `dtype`."""
    dtype = np.dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _all_patterns(dtype: np.dtype[Any]) -> np.ndarray:
    return (
        np.arange(1 << (8 * dtype.itemsize), dtype=np.uint32)
        .astype(f"u{dtype.itemsize}")
        .view(dtype)
    )


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[bool]:
    """Replace `native.<name>` with a wrapper recording what each call made while the compiled
    loops are switched on returned."""
    calls: list[bool] = []
    real: Callable[..., bool] = getattr(native, name)

    def spy(*args: Any, **kwargs: Any) -> bool:
        done = real(*args, **kwargs)
        if native.enabled():
            calls.append(done)
        return done

    monkeypatch.setattr(native, name, spy)
    return calls


def test_extension_is_built_when_required() -> None:
    if os.environ.get("LAZYPARAMS_REQUIRE_NATIVE") != "1":
        pytest.skip("LAZYPARAMS_REQUIRE_NATIVE=1 is not set")
    assert native.available(), (
        "LAZYPARAMS_REQUIRE_NATIVE=1 but lazyparams.runtime._native did not load: build it "
        "with `pip install -e .` (and do not set LAZYPARAMS_NATIVE=0)"
    )
    assert native.enabled()


@native_only
def test_use_native_switches_and_restores() -> None:
    x, out = np.ones(3, F32), np.zeros(3, F16)
    assert native.enabled()
    with native.use_native(False):
        assert not native.enabled() and native.available()
        assert not native.cast(x, out)
        assert not native.transpose_2d(np.ones((2, 3), F32), np.zeros((3, 2), F32))
        with native.use_native(True):
            assert native.enabled()
        assert not native.enabled()
    np.testing.assert_array_equal(out, 0)
    with pytest.raises(KeyError), native.use_native(False):
        raise KeyError
    assert native.enabled() and native.cast(x, out)
    np.testing.assert_array_equal(out, 1)


# Transposes ------------------------------------------------------------------------------------

TRANSPOSE_DTYPES = [np.uint8, E4M3, np.uint16, F16, BF16, F32, F64]
SMALL_SHAPES = [
    (1, 1),
    (1, 37),
    (37, 1),
    (1, 4099),
    (4099, 1),
    (2, 3),
    (3, 2),
    (7, 13),
    (16, 16),
    (17, 15),
    (15, 17),
    (31, 97),
    (64, 64),
    (65, 63),
    (127, 131),
    (128, 128),
    (129, 257),
    (250, 3),
    (3, 250),
    (256, 200),
    (300, 70),
    (1009, 17),
]
# (row stride past the smallest multiple of 64 bytes that fits a row, offset of the first
# element past a 64-byte boundary): streamed where the stride is a multiple of 64 and the
# offset of 16, with a head strip up to the next line where the offset is not 0
PLACEMENTS = [(0, 0), (0, 16), (0, 32), (0, 48), (0, 8), (16, 0), (16, 16), (64, 48)]


def _fill(a: np.ndarray, byte: int = 0xA5) -> None:
    """Every byte of `a` (whose rows are contiguous) set to `byte`."""
    words = _bits(a)
    words[...] = int.from_bytes(bytes([byte]) * words.itemsize, "little")


def _transpose(src: np.ndarray, dst: np.ndarray, total_bytes: int | None = None) -> None:
    """The compiled transpose into `dst`, checked against numpy's bits."""
    _fill(dst)
    assert native.transpose_2d(src, dst, total_bytes), (src.shape, src.dtype, dst.strides)
    _same_bits(dst, np.ascontiguousarray(src.T))


def _placed(
    shape: tuple[int, int], dtype: Any, row_bytes: int, offset: int
) -> tuple[np.ndarray, np.ndarray]:
    """A (rows, cols) view of a bigger byte buffer: rows `row_bytes` apart, the first element
    `offset` bytes past a 64-byte boundary. Returns the buffer and the view."""
    dtype = np.dtype(dtype)
    rows, cols = shape
    assert row_bytes % dtype.itemsize == 0 and row_bytes >= cols * dtype.itemsize
    raw = np.empty(rows * row_bytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    block = raw[start : start + rows * row_bytes].view(dtype)
    view = block.reshape(rows, row_bytes // dtype.itemsize)[:, :cols]
    assert view.ctypes.data % 64 == offset
    return raw, view


def _transpose_in_every_placement(src: np.ndarray, total_bytes: int | None) -> None:
    """The compiled transpose of `src` into destinations in each of PLACEMENTS: right, and
    not a byte written outside the destination."""
    n, m = src.shape
    want = np.ascontiguousarray(src.T)
    base = -(-n * src.itemsize // 64) * 64
    for pad, offset in PLACEMENTS:
        raw, dst = _placed((m, n), src.dtype, base + pad, offset)
        raw[...] = 0xA5
        assert native.transpose_2d(src, dst, total_bytes), (pad, offset)
        _same_bits(dst, want)
        _fill(dst)  # what remains is what the transpose must not have touched
        assert np.all(raw == 0xA5), f"wrote outside dst (row pad {pad}, offset {offset})"


@native_only
@pytest.mark.parametrize("dtype", TRANSPOSE_DTYPES, ids=str)
def test_transpose_matches_numpy_on_small_shapes(dtype: Any) -> None:
    """Every shape through the cached loop and, declared part of a large output, through the
    streamed one; with strided and reversed rows on either side."""
    for seed, (n, m) in enumerate(SMALL_SHAPES):
        src = _random((n, m), dtype, seed)
        _transpose(src, np.empty((m, n), dtype))
        wide = _random((n, m + 5), dtype, seed + 100)
        dst = np.empty((m, n + 3), dtype)
        _fill(dst, 0x5A)
        _transpose(wide[:, 2 : m + 2], dst[:, 1 : n + 1])
        margin = _bits(dst[:, [0, n + 1, n + 2]])
        assert np.all(margin == int.from_bytes(b"\x5a" * dst.itemsize, "little")), (n, m)
        _transpose(wide[::-1, :m], dst[::-1, :n])
        _transpose(wide[::-1, :m], dst[::-1, :n], native.STREAM_BYTES)
        for total in (None, native.STREAM_BYTES):
            _transpose_in_every_placement(src, total)
            _transpose_in_every_placement(wide[:, 3 : m + 3], total)


LARGE = [
    ((2048, 1100), F32),
    ((1536, 1536), F32),
    ((4096, 2100), np.dtype(np.uint8)),
    ((2048, 2100), F16),
    ((1024, 1100), F64),
    ((2053, 1031), F32),  # neither side a multiple of a strip or a register block
    ((4099, 2053), np.dtype(np.uint8)),
]


@native_only
@pytest.mark.parametrize(("shape", "dtype"), LARGE, ids=[f"{s[0]}x{s[1]}-{d}" for s, d in LARGE])
def test_transpose_of_large_outputs_in_every_placement(
    shape: tuple[int, int], dtype: np.dtype[Any]
) -> None:
    """Outputs of at least 8 MiB take the streaming stores where the destination rows are
    16-byte aligned and a multiple of 64 bytes apart (a head strip first when the rows start
    past a line boundary), and cached stores otherwise; neither may write outside dst."""
    n, m = shape
    assert n * m * dtype.itemsize >= native.STREAM_BYTES
    src = _random(shape, dtype, n + m)
    _transpose(src, np.empty((m, n), dtype))
    _transpose_in_every_placement(src, None)
    wide = np.empty((n, m + 9), dtype)
    wide[:, 3 : m + 3] = src
    _, dst = _placed((m, n), dtype, -(-n * dtype.itemsize // 64) * 64, 16)
    _transpose(wide[:, 3 : m + 3], dst)
    _transpose(wide[::-1, 3 : m + 3], dst[::-1])


PERMUTE_CASES = [
    ((3, 80, 90), None),
    ((80, 3, 90), None),
    ((2, 70, 3, 70), None),
    ((4, 65, 67), None),
    ((2, 3, 64, 100), None),
    ((5, 1, 4100), None),
    ((1, 5, 1, 7), None),
    # outputs of 8 MiB and more: every plane streamed (where its rows are aligned)
    ((4, 1024, 600), (0, 2, 1)),
    ((4, 1024, 600), (2, 0, 1)),
    ((2, 3, 700, 1024), (1, 0, 3, 2)),
]


@native_only
@pytest.mark.parametrize("dtype", [np.uint8, F16, BF16, F32, F64], ids=str)
def test_permute_dims_is_the_same_with_and_without_the_compiled_loop(
    dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy(monkeypatch, "transpose_2d")
    for seed, (shape, only) in enumerate(PERMUTE_CASES):
        x = _random(shape, dtype, seed)
        for axes in [only] if only else itertools.permutations(range(len(shape))):
            with native.use_native(False):
                numpy_path = fast.permute_dims(x, axes)
            got = fast.permute_dims(x, axes)
            _same_bits(got, numpy_path)
            _same_bits(got, np.ascontiguousarray(np.transpose(x, axes)))
    # every plane handed over has contiguous rows: the compiled loop takes each one
    assert all(calls), f"{calls.count(False)} of {len(calls)} planes were declined"
    assert len(calls) >= 50, f"only {len(calls)} planes went through the compiled transpose"


@native_only
def test_transpose_declines_what_it_cannot_do_and_leaves_dst_alone() -> None:
    src = _random((40, 24), F32, 1)
    cases: list[tuple[str, np.ndarray, np.ndarray]] = [
        ("strided src columns", _random((40, 48), F32, 2)[:, ::2], np.empty((24, 40), F32)),
        ("strided dst columns", src, np.empty((24, 80), F32)[:, ::2]),
        ("transposed dst", src, np.empty((40, 24), F32).T),
        ("dtype mismatch", src, np.empty((24, 40), np.int32)),
        ("itemsize mismatch", src, np.empty((24, 40), F64)),
        ("untransposed shape", src, np.empty((40, 24), F32)),
        ("wrong shape", src, np.empty((24, 41), F32)),
        ("3-D", src.reshape(40, 4, 6), np.empty((6, 4, 40), F32)),
        ("1-D", src.reshape(-1), np.empty(960, F32)),
        ("16-byte items", _random((40, 24), np.complex128, 3), np.empty((24, 40), np.complex128)),
        ("objects", np.empty((40, 24), object), np.empty((24, 40), object)),
    ]
    readonly = np.empty((24, 40), F32)
    readonly.flags.writeable = False
    cases.append(("read-only dst", src, readonly))
    for what, s, d in cases:
        if d.flags.writeable:
            if d.dtype.hasobject:
                d[...] = "untouched"
            else:
                _fill(d)
        before = d.copy()
        assert not native.transpose_2d(s, d), what
        if d.dtype.hasobject:
            assert np.all(d == before), what
        else:
            _same_bits(d, before)
    # the callers still transpose (or refuse) as numpy does
    finite = np.random.default_rng(1).standard_normal((40, 24)).astype(F32)
    out = np.empty((24, 40), F64)
    fast.transpose_2d(finite, out)
    np.testing.assert_array_equal(out, finite.T.astype(F64))
    s = _random((40, 48), F32, 2)[:, ::2]
    _same_bits(fast.permute_dims(s, (1, 0)), np.ascontiguousarray(s.T))
    assert native.transpose_2d(np.empty((3, 5), F32)[:0], np.empty((5, 3), F32)[:, :0])
    assert fast.permute_dims(np.empty((0, 5), F32), (1, 0)).shape == (5, 0)
    with native.use_native(False):
        assert not native.transpose_2d(src, np.empty((24, 40), F32))


@native_only
def test_unaligned_buffers_are_declined_and_the_callers_stay_exact() -> None:
    """Misaligned arrays (a tensor at an odd offset of a mapped file) never reach the C loops,
    which read typed words: the wrappers decline, and fast/quant give the numpy path's bits."""
    for dtype in (np.uint16, F32, F64):
        n, m = 130, 70
        _, src = _placed((n, m), dtype, 1024, 1)
        _bits(src)[...] = _bits(_random((n, m), dtype, 4))
        _, dst = _placed((m, n), dtype, 2048, 3)
        assert not dst.flags.aligned
        assert not native.transpose_2d(src, dst)
        fast.transpose_2d(src, dst)
        _same_bits(dst, src.T)
    x = np.empty(40_001 * 4 + 1, np.uint8)[1:].view(F32)
    x[...] = _random((40_001,), F32, 5)
    for dst in NARROW:
        out = np.empty(40_001 * dst.itemsize + 1, np.uint8)[1:].view(dst)
        assert not native.cast(x, out)
        fast.cast_into(x, out)
        _same_bits(out, _astype(x, dst), x)
    for dtype in (F32, F16, BF16):
        values = _segments(12, 1000, dtype, seed=6)
        x = np.empty(values.nbytes + 1, np.uint8)[1:].view(dtype).reshape(values.shape)
        _bits(x)[...] = _bits(values)
        assert not x.flags.aligned
        q, scale = np.empty((1, 12, 1000), np.int8), np.empty(12, F32)
        assert not native.quantize_int8(x.reshape(1, 12, 1000), q, scale)
        got = _kernel("quantize_int8", x, {"axis": 0}, on=True)
        want = _kernel("quantize_int8", values, {"axis": 0}, on=False)
        _same_bits(got[0], want[0])
        _same_bits(got[1], want[1])
        packed, scales = np.empty((12, 500), np.uint8), np.empty((12, 40), F32)
        assert not native.quantize_int4(x, 25, packed, scales)
        got = _kernel("quantize_int4", x, {"group_size": 25}, on=True)
        want = _kernel("quantize_int4", values, {"group_size": 25}, on=False)
        _same_bits(got[0], want[0])
        _same_bits(got[1], want[1])


# Casts -----------------------------------------------------------------------------------------


def _halfway_points(dtype: np.dtype[Any]) -> np.ndarray:
    """The non-negative finite values of `dtype` and the float32 points halfway between
    neighbours (0 and the smallest subnormal, the largest finite and the next power step), as
    float32 bits: all exactly representable."""
    v = np.unique(np.abs(_astype(_all_patterns(dtype), F64)))
    v = v[np.isfinite(v)]
    mids = np.append((v[:-1] + v[1:]) / 2, v[-1] + (v[-1] - v[-2]) / 2)
    both = np.concatenate([v, mids])
    as_f32 = both.astype(F32)
    assert np.array_equal(as_f32.astype(F64), both)
    return as_f32.view(np.uint32)


@functools.cache
def _float32_patterns() -> np.ndarray:
    """About 3 million float32 bit patterns stratified over every exponent and sign: random
    mantissas, mantissas with only low bits (NaN payloads whose top bits are zero), a random
    mantissa cut at every bit position to exactly halfway and one ulp either side, every
    top-16-bit class, the halfway points of each narrow target, and explicit edges."""
    rng = np.random.default_rng(20240607)
    exps = np.arange(256, dtype=np.uint32)[:, None, None] << 23
    signs = np.array([0, 1 << 31], np.uint32)
    parts = [(exps | rng.integers(0, 1 << 23, (256, 1, 2048), dtype=np.uint32)).reshape(-1)]
    for width in (1, 3, 10, 13, 16, 20):
        parts.append(
            (exps | rng.integers(0, 1 << width, (256, 1, 64), dtype=np.uint32)).reshape(-1)
        )
    position = np.arange(23, dtype=np.uint32)[None, :, None]
    high = rng.integers(0, 1 << 23, (256, 23, 16), dtype=np.uint32)
    halfway = (exps | (high >> (position + 1) << (position + 1)) | (1 << position)).reshape(-1)
    parts += [halfway, halfway - np.uint32(1), halfway + np.uint32(1)]
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    parts += [top, top | 1, top | 0x8000, top | rng.integers(0, 1 << 16, 1 << 16, dtype=np.uint32)]
    for dtype in NARROW:
        points = _halfway_points(dtype)
        parts += [points, points - np.uint32(1), points + np.uint32(1)]
    edges = [
        0x00000000,  # zero
        0x00000001,  # smallest subnormal
        0x007FFFFF,  # largest subnormal
        0x00800000,  # smallest normal
        0x7F7FFFFF,  # largest finite
        0x477FE000,  # float16 max
        0x477FEFFF,  # just below float16's halfway to infinity
        0x477FF000,  # float16's halfway to infinity
        0x7F7F7FFF,  # just below bfloat16's halfway to infinity
        0x7F7F8000,  # bfloat16's halfway to infinity
        0x43E80000,  # 464: halfway above float8_e4m3fn's max
        0x476FFFFF,  # just below float8_e5m2's halfway to infinity
        0x47700000,  # 61440: float8_e5m2's halfway to infinity
        0x7F800000,  # infinity
        0x7F800001,  # signalling NaNs, payloads with zero top bits first
        0x7F800100,
        0x7F801000,
        0x7F801FFF,
        0x7F802000,
        0x7F80FFFF,
        0x7F810000,
        0x7F8FFFFF,
        0x7FA00000,
        0x7FBFFFFF,
        0x7FC00000,  # quiet NaNs
        0x7FC00001,
        0x7FC02000,
        0x7FD55555,
        0x7FE00000,
        0x7FFFFFFF,
    ]
    parts.append(np.array(edges, np.uint32))
    parts.append(rng.integers(0, 1 << 32, 200_000, dtype=np.uint32))
    bits = np.concatenate(parts)
    return (bits[:, None] | signs).reshape(-1).view(F32)


@native_only
@pytest.mark.parametrize("dst", NARROW, ids=str)
def test_cast_from_float32_matches_astype_bit_for_bit(dst: np.dtype[Any]) -> None:
    x = _float32_patterns()
    assert 2_000_000 <= x.size <= 4_000_000
    want = _astype(x, dst)
    out = np.empty(x.shape, dst)
    _fill(out)
    assert native.cast(x, out)
    _same_bits(out, want, x)
    # a multi-dimensional array of the same elements, and a 0-d one
    shaped = x[: 1 << 20].reshape(64, 128, 128)
    out = np.empty(shaped.shape, dst)
    assert native.cast(shaped, out)
    _same_bits(out, want[: 1 << 20].reshape(shaped.shape), shaped)
    scalar = np.array(x[123_457])
    out = np.empty((), dst)
    assert native.cast(scalar, out)
    _same_bits(out, want[123_457])


@native_only
def test_cast_to_float16_of_vectors_holding_a_nan() -> None:
    """Where the CPU converts eight float32 at a time, a vector holding a NaN is redone element
    by element (the CPU quiets signalling NaNs): a NaN in every eighth place sends every
    pattern down that path."""
    x = _float32_patterns().view(np.uint32)
    x = x[: x.size // 7 * 7].reshape(-1, 7)
    nans = np.random.default_rng(8).integers(0x7F800001, 0x80000000, (len(x), 1), np.uint32)
    mixed = np.concatenate([x, nans], axis=1).reshape(-1).view(F32)
    out = np.empty(mixed.shape, F16)
    assert native.cast(mixed, out)
    _same_bits(out, _astype(mixed, F16), mixed)
    for n in range(1, 17):  # the tail after the last whole vector, and short arrays
        part = np.ascontiguousarray(mixed[7 : 7 + n])
        out = np.empty(n, F16)
        assert native.cast(part, out)
        _same_bits(out, _astype(part, F16), part)


@native_only
@pytest.mark.parametrize("dst", NARROW, ids=str)
def test_fast_cast_is_the_same_with_and_without_the_compiled_loop(
    dst: np.dtype[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.ascontiguousarray(_float32_patterns()[::5])
    x = x[: x.size // 7 * 7].reshape(-1, 7)
    with native.use_native(False):
        numpy_path = fast.cast(x, dst)
    calls = _spy(monkeypatch, "cast")
    got = fast.cast(x, dst)
    assert calls == [True]
    _same_bits(got, numpy_path, x)
    _same_bits(got, _astype(x, dst), x)


@native_only
@pytest.mark.parametrize("src", NARROW, ids=str)
def test_cast_from_narrow_floats_on_every_bit_pattern(src: np.dtype[Any]) -> None:
    x = _all_patterns(src)
    for dst in [F32, F64, *NARROW]:
        if dst == src or (src == BF16 and dst == F64):  # numpy's own cast: a shift
            assert not native.cast(x, np.empty(x.shape, dst))
            continue
        want = _astype(x, dst)
        out = np.empty(x.shape, dst)
        _fill(out)
        assert native.cast(x, out), dst
        _same_bits(out, want, x)
        tiled = np.tile(x, 3).reshape(3, -1)[:, ::-1].copy()
        with native.use_native(False):
            numpy_path = fast.cast(tiled, dst)
        got = fast.cast(tiled, dst)
        _same_bits(got, numpy_path, tiled)
        _same_bits(got, _astype(tiled, dst), tiled)


@native_only
def test_cast_declines_what_it_cannot_do_and_leaves_out_alone() -> None:
    x = _random((64, 48), F32, 6)
    x16 = _random((64, 48), F16, 7)
    readonly = np.empty((64, 48), F16)
    readonly.flags.writeable = False
    cases: list[tuple[str, np.ndarray, np.ndarray]] = [
        ("strided x", x[:, ::2], np.empty((64, 24), F16)),
        ("transposed x", x.T, np.empty((48, 64), BF16)),
        ("strided x, float8", x[::2], np.empty((32, 48), E4M3)),
        ("strided narrow x", x16[:, 1::2], np.empty((64, 24), F32)),
        ("strided out", x, np.empty((64, 96), F16)[:, ::2]),
        ("transposed out", x, np.empty((48, 64), E5M2).T),
        ("shape mismatch", x, np.empty((48, 64), F16)),
        ("float32 to float64", x, np.empty((64, 48), F64)),
        ("float32 to float32", x, np.empty((64, 48), F32)),
        ("float64 to float32", _astype(x, F64), np.empty((64, 48), F32)),
        ("big-endian float64", _astype(x, np.dtype(">f8")), np.empty((64, 48), F16)),
        ("float32 to int8", x, np.empty((64, 48), np.int8)),
        ("int16 to float32", x16.view(np.int16), np.empty((64, 48), F32)),
        ("float16 to float16", x16, np.empty((64, 48), F16)),
        ("float16 to int32", x16, np.empty((64, 48), np.int32)),
        ("big-endian float32", x.astype(">f4"), np.empty((64, 48), F16)),
        ("big-endian float16", x16.astype(">f2"), np.empty((64, 48), F32)),
        ("to big-endian float32", x16, np.empty((64, 48), ">f4")),
        ("read-only out", x, readonly),
    ]
    for what, src, out in cases:
        if out.flags.writeable:
            _fill(out)
        before = out.copy()
        assert not native.cast(src, out), what
        _same_bits(out, before)
        if src.shape == out.shape:  # the caller's numpy path gives astype's bits
            _same_bits(fast.cast(src, out.dtype), _astype(src, out.dtype), src)
    with native.use_native(False):
        assert not native.cast(x, np.empty((64, 48), F16))
    assert native.cast(np.empty(0, F32), np.empty(0, E4M3))


# Quantization ----------------------------------------------------------------------------------

QUANT_DTYPES = [F32, F16, BF16, E4M3, E5M2]  # float8 is read through a table
KINDS = 8
SMALLEST = np.uint32(1).view(F32)  # 2**-149, the smallest float32 subnormal


def _segments(
    count: int, length: int, dtype: np.dtype[Any], seed: int, qmax: int = 127
) -> np.ndarray:
    """`count` rows of `length` values of `dtype`, each row of one kind in turn: normal data,
    all zeros (with -0.0), values so small that the scale is subnormal, values up to the
    dtype's largest, exact halves at scale 1 (round half to even), two magnitudes, and small
    multiples of the smallest subnormal, whose scale is so coarse that x / scale passes qmax
    and must be clipped (float16 and bfloat16 round these to zero)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, length)).astype(F32)
    kind = (np.arange(count) + seed) % KINDS
    tiny = np.float32(2e-38) if dtype != F16 else np.float32(1e-5)
    huge = np.float32(ml_dtypes.finfo(dtype).max)
    uniform = rng.uniform(-1, 1, (count, length)).astype(F32)
    x[kind == 1] = np.where(rng.random((int(np.sum(kind == 1)), length)) < 0.5, 0.0, -0.0)
    x[kind == 2] = uniform[kind == 2] * tiny
    x[kind == 3] = uniform[kind == 3] * huge
    x[kind == 3, 0] = -huge
    halves = rng.integers(-127, 127, (count, length)).astype(F32) + np.float32(0.5)
    x[kind == 4] = halves[kind == 4]
    x[kind == 4, 0] = 127
    x[kind == 5] *= np.float32(1e-3)
    x[kind == 6] *= np.float32(1e3)
    coarse = 3 * qmax // 2  # max / qmax rounds to one smallest subnormal
    multiples = rng.integers(-coarse, coarse + 1, (count, length)).astype(F32) * SMALLEST
    x[kind == 7] = multiples[kind == 7]
    x[kind == 7, 0] = -coarse * SMALLEST
    out = _astype(np.clip(x, -huge, huge), dtype)
    assert np.all(np.isfinite(out.astype(F32)))
    return out


def _int8_input(shape: tuple[int, ...], axis: int, dtype: np.dtype[Any], seed: int) -> np.ndarray:
    rest = shape[:axis] + shape[axis + 1 :]
    seg = _segments(shape[axis], math.prod(rest), dtype, seed).reshape((shape[axis], *rest))
    return np.ascontiguousarray(np.moveaxis(seg, 0, axis))


def _oracle_int8(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The format written out: per channel, scale = max|x| / 127 (1 where 0), q = rint(x /
    scale) clipped to [-127, 127], all in float32."""
    channels = np.moveaxis(x.astype(F32), axis, 0).reshape(x.shape[axis], -1)
    amax = np.abs(channels).max(axis=1)
    with np.errstate(all="ignore"):
        scale = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(F32)
        q = np.clip(np.rint(channels / scale[:, None]), -127, 127).astype(np.int8)
    rest = x.shape[:axis] + x.shape[axis + 1 :]
    return np.moveaxis(q.reshape((x.shape[axis], *rest)), 0, axis), scale


def _oracle_int4(x: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """Groups of `group` along rows, scale = max|x| / 7 (1 where 0), q = rint(x / scale) in
    [-8, 7], packed as q[2j] mod 16 + 16 * (q[2j + 1] mod 16)."""
    n, k = x.shape
    groups = x.astype(F32).reshape(n, k // group, group)
    amax = np.abs(groups).max(axis=2)
    with np.errstate(all="ignore"):
        scale = np.where(amax == 0, np.float32(1), amax / np.float32(7)).astype(F32)
        q = np.clip(np.rint(groups / scale[..., None]), -8, 7).astype(np.int16).reshape(n, k)
    packed = (q[:, 0::2] % 16 + 16 * (q[:, 1::2] % 16)).astype(np.uint8)
    return packed, scale


def _kernel(name: str, x: np.ndarray, attrs: dict[str, Any], on: bool) -> tuple[Any, ...]:
    with native.use_native(on):
        result: tuple[Any, ...] = run_kernel(name, [x], attrs)
    return result


def _shape3(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


INT8_SHAPES = [
    (1,),
    (7,),
    (5000,),
    (1, 1),
    (3, 4100),
    (4100, 3),
    (1, 9000),
    (9000, 1),
    (2, 3, 5),
    (1, 5, 1),
    (3, 1, 4200),
    (2, 4097, 3),
    (2, 3, 1, 5),
    (1, 2, 1, 3),
    (2, 3, 4, 700),
]


@native_only
@pytest.mark.parametrize("shape", INT8_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_quantize_int8_is_the_same_with_and_without_the_compiled_loop(
    dtype: np.dtype[Any], shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    for axis in range(len(shape)):
        x = _int8_input(shape, axis, dtype, seed=len(shape) * 10 + axis)
        shape3 = _shape3(shape, axis)
        q3, scale = np.empty(shape3, np.int8), np.empty(shape[axis], F32)
        assert native.quantize_int8(x.reshape(shape3), q3, scale), (shape, axis)
        numpy_path = _kernel("quantize_int8", x, {"axis": axis}, on=False)
        _same_bits(q3.reshape(shape), numpy_path[0])
        _same_bits(scale, numpy_path[1])
        if dtype == F32:
            want = _oracle_int8(x, axis)
            _same_bits(q3.reshape(shape), want[0])
            _same_bits(scale, want[1])
        calls = _spy(monkeypatch, "quantize_int8")
        got = _kernel("quantize_int8", x, {"axis": axis - len(shape)}, on=True)
        monkeypatch.undo()
        assert calls == [True]
        _same_bits(got[0], numpy_path[0])
        _same_bits(got[1], numpy_path[1])


INT4_CASES = [
    (1, 2, 2),
    (1, 2, 1),
    (3, 8, 4),
    (5, 64, 32),
    (7, 6, 3),
    (6, 10, 5),
    (2, 130, 2),
    (9, 96, 96),
    (3, 256, 128),
    (2, 4098, 2),
    (2, 8192, 64),
    (1, 5000, 1000),
    (3, 4100, 4100),
    (2, 8200, 8200),
]


@native_only
@pytest.mark.parametrize(("n", "k", "group"), INT4_CASES, ids=str)
@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_quantize_int4_is_the_same_with_and_without_the_compiled_loop(
    dtype: np.dtype[Any], n: int, k: int, group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = _segments(n * (k // group), group, dtype, seed=n + k + group, qmax=7).reshape(n, k)
    packed, scale = np.empty((n, k // 2), np.uint8), np.empty((n, k // group), F32)
    assert native.quantize_int4(x, group, packed, scale)
    numpy_path = _kernel("quantize_int4", x, {"group_size": group}, on=False)
    _same_bits(packed, numpy_path[0])
    _same_bits(scale, numpy_path[1])
    if dtype == F32:
        want = _oracle_int4(x, group)
        _same_bits(packed, want[0])
        _same_bits(scale, want[1])
    calls = _spy(monkeypatch, "quantize_int4")
    got = _kernel("quantize_int4", x, {"group_size": group}, on=True)
    assert calls == [True]
    _same_bits(got[0], numpy_path[0])
    _same_bits(got[1], numpy_path[1])


@native_only
def test_quantize_where_the_scale_underflows_to_zero() -> None:
    """max|x| / qmax below half the smallest subnormal: the scale is 0 (not 1), x / 0 is
    infinite (clipped to qmax) or NaN for zeros; both paths agree on the codes."""
    x = np.zeros((3, 6000), F32)
    x[0, ::3] = 1e-44
    x[1, 7] = -1e-44
    x[2] = np.linspace(-1, 1, 6000)
    for axis in (0, 1):
        xa = np.ascontiguousarray(x if axis == 0 else x.T)
        got, want = (_kernel("quantize_int8", xa, {"axis": axis}, on) for on in (True, False))
        assert np.count_nonzero(_bits(got[1]) == 0) == 2
        _same_bits(got[0], want[0])
        _same_bits(got[1], want[1])
    for group in (2, 1000):
        got, want = (_kernel("quantize_int4", x, {"group_size": group}, on) for on in (True, False))
        _same_bits(got[0], want[0])
        _same_bits(got[1], want[1])


@native_only
@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_quantize_int8_finds_the_max_at_every_run_boundary(dtype: np.dtype[Any]) -> None:
    """Channels read in runs of 4096 (rows of blocks, and rows longer than the 65536 that are
    converted whole): a spike at each edge of a run must set its channel's scale."""
    places = [0, 4095, 4096, 8191, 8192, 8999]
    long_places = [0, 4095, 4096, 65535, 65536, 69999]
    cases = [((6, 9000), 0, places), ((2, 6, 9000), 1, places), ((6, 70000), 0, long_places)]
    for shape, axis, places in cases:
        x = np.random.default_rng(9).uniform(-1, 1, shape).astype(F32)
        for c, at in enumerate(places):
            index = (c, at) if axis == 0 else (c % 2, c, at)
            x[index] = 48.0 if c % 2 else -48.0  # exact in every dtype here
        x = _astype(x, dtype)
        shape3 = _shape3(shape, axis)
        q3, scale = np.empty(shape3, np.int8), np.empty(6, F32)
        assert native.quantize_int8(x.reshape(shape3), q3, scale)
        _same_bits(scale, np.full(6, np.float32(48) / np.float32(127)))
        numpy_path = _kernel("quantize_int8", x, {"axis": axis}, on=False)
        _same_bits(q3.reshape(shape), numpy_path[0])
        _same_bits(scale, numpy_path[1])


SPECIALS = [np.inf, -np.inf, np.nan]


@native_only
@pytest.mark.parametrize("dtype", QUANT_DTYPES, ids=str)
def test_quantize_declines_infinities_and_nans(dtype: np.dtype[Any]) -> None:
    """The compiled loops report a non-finite input (False) and the kernels fall back to
    numpy, whose results (NaN scales included) they return unchanged."""
    base = _segments(4, 8400, dtype, seed=3).astype(F32)
    for special, (r, c) in itertools.product(SPECIALS, [(0, 0), (3, 8399), (1, 4097), (2, 5)]):
        x32 = base.copy()
        x32[r, c] = special
        x = _astype(x32, dtype)
        for axis in (0, 1):
            xa = np.ascontiguousarray(x if axis == 0 else x.T)
            shape3 = _shape3(xa.shape, axis)
            q3, s = np.empty(shape3, np.int8), np.empty(xa.shape[axis], F32)
            assert not native.quantize_int8(xa.reshape(shape3), q3, s), (special, r, c, axis)
            got, want = (_kernel("quantize_int8", xa, {"axis": axis}, on) for on in (True, False))
            _same_nan_aware(got[0], want[0])
            _same_nan_aware(got[1], want[1])
            assert np.count_nonzero(~np.isfinite(got[1])) == 1
        for group in (2, 4200):
            packed, s = np.empty((4, 4200), np.uint8), np.empty((4, 8400 // group), F32)
            assert not native.quantize_int4(x, group, packed, s), (special, r, c, group)
            got, want = (
                _kernel("quantize_int4", x, {"group_size": group}, on) for on in (True, False)
            )
            _same_nan_aware(got[0], want[0])
            _same_nan_aware(got[1], want[1])


@native_only
def test_quantize_declines_dtypes_and_layouts_it_cannot_read() -> None:
    x = _segments(6, 40, F32, seed=4)
    q, s = np.empty((1, 6, 40), np.int8), np.empty(6, F32)
    packed, s4 = np.empty((6, 20), np.uint8), np.empty((6, 4), F32)
    for what, bad in [
        ("float64", x.astype(F64)),
        ("int16", x.astype(np.int16)),
        ("float8", _astype(np.clip(x, -400, 400), E4M3)),  # read through its table
        ("big-endian", x.astype(">f4")),
    ]:
        done = native.quantize_int8(bad.reshape(1, 6, 40), q, s)
        assert done == (what == "float8"), what
        assert native.quantize_int4(bad, 10, packed, s4) == (what == "float8"), what
    assert not native.quantize_int8(np.asfortranarray(x).reshape(1, 6, 40, order="A"), q, s)
    assert not native.quantize_int4(np.asfortranarray(x), 10, packed, s4)
    assert not native.quantize_int8(x.reshape(1, 6, 40), np.empty((1, 6, 80), np.int8)[..., ::2], s)
    assert not native.quantize_int4(x, 10, np.empty((6, 40), np.uint8)[:, ::2], s4)
    assert not native.quantize_int8(x, q, s)  # rank 2, not (outer, channels, inner)
    assert not native.quantize_int4(x.reshape(1, 6, 40), 10, packed, s4)
    readonly = np.empty((1, 6, 40), np.int8)
    readonly.flags.writeable = False
    for what, codes, scale in [
        ("int16 q", np.empty((1, 6, 40), np.int16), s),
        ("uint8 q", np.empty((1, 6, 40), np.uint8), s),
        ("float64 scale", q, np.empty(6, F64)),
        ("float16 scale", q, np.empty(6, F16)),
        ("read-only q", readonly, s),
    ]:
        assert not native.quantize_int8(x.reshape(1, 6, 40), codes, scale), what
    for what, codes, scale in [
        ("int8 packed", np.empty((6, 20), np.int8), s4),
        ("uint16 packed", np.empty((6, 20), np.uint16), s4),
        ("float64 scale", packed, np.empty((6, 4), F64)),
    ]:
        assert not native.quantize_int4(x, 10, codes, scale), what
    with native.use_native(False):
        assert not native.quantize_int8(x.reshape(1, 6, 40), q, s)
        assert not native.quantize_int4(x, 10, packed, s4)


@native_only
def test_quantize_into_outputs_of_other_dtypes_agrees_with_the_numpy_path() -> None:
    """The compiled loops write int8 (uint8) codes and float32 scales only; other outputs go
    to numpy, which converts (before the wrapper checked dtypes, the C loop raised)."""
    x = _segments(4, 6, F32, seed=5)
    results = []
    for on in (True, False):
        with native.use_native(on):
            q, s = np.zeros((4, 6), np.int16), np.zeros(6, F64)
            quant.quantize_int8_into(x, 1, q, s)
            packed, s4 = np.zeros((4, 3), np.uint8), np.zeros((4, 3), F64)
            quant.quantize_int4_into(x, 2, packed, s4)
        results.append((q, s, packed, s4))
    for got, want in zip(*results, strict=True):
        _same_bits(got, want)


# Threads ---------------------------------------------------------------------------------------


@native_only
def test_transposes_casts_and_quantizers_from_four_threads_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workers, rounds = 4, 3
    sources = [_random((700 + 3 * i, 900 - 5 * i), F32, 40 + i) for i in range(workers)]
    values = [_segments(64, 4096 + 8 * i, F32, seed=50 + i) for i in range(workers)]
    targets = [F16, BF16, E4M3, E5M2]
    casts = [_astype(v, targets[i]) for i, v in enumerate(values)]
    quants = [_oracle_int8(v, 0) for v in values]
    barrier = threading.Barrier(workers)
    transposes = _spy(monkeypatch, "transpose_2d")

    def work(i: int) -> int:
        barrier.wait()
        for _ in range(rounds):
            _same_bits(fast.permute_dims(sources[i], (1, 0)), np.ascontiguousarray(sources[i].T))
            out = np.empty(values[i].shape, targets[i])
            assert native.cast(values[i], out)
            _same_bits(out, casts[i], values[i])
            q, s = run_kernel("quantize_int8", [values[i]], {"axis": 0})
            _same_bits(q, quants[i][0])
            _same_bits(s, quants[i][1])
        return i

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        assert sorted(pool.map(work, range(workers))) == list(range(workers))
    assert transposes.count(True) == workers * rounds


def test_quantize_int8_into_a_non_contiguous_q_writes_the_codes() -> None:
    """A q that cannot be reshaped to 3-D without a copy still receives the codes."""
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 5)).astype(F32)
    expected = _kernel("quantize_int8", x, {"axis": 1}, on=False)
    for on in (True, False):
        with native.use_native(on):
            q = np.zeros((2, 3, 4, 6), np.int8)[..., :5]
            scale = np.zeros(3, F32)
            quant.quantize_int8_into(x, 1, q, scale)
        assert np.any(q != 0)
        _same_bits(q, expected[0])
        _same_bits(scale, expected[1])


@native_only
def test_a_non_finite_value_late_in_a_long_row_is_declined() -> None:
    """A NaN past the first runs of a row longer than 65536 elements still declines."""
    x = np.random.default_rng(12).uniform(-1, 1, (2, 70000)).astype(F32)
    x[1, 69000] = np.nan
    q3, scale = np.empty((1, 2, 70000), np.int8), np.empty(2, F32)
    assert not native.quantize_int8(x.reshape(1, 2, 70000), q3, scale)


@native_only
def test_overlapping_input_and_output_are_declined() -> None:
    """A cast or transpose into memory its input occupies would read what it already wrote."""
    buffer = np.zeros(4096, np.uint32)
    x = buffer.view(F32)
    assert not native.cast(x, buffer.view(F16)[:4096])
    square = np.zeros((64, 64), F32)
    assert not native.transpose_2d(square, square)
    q3, scale = np.empty((1, 4, 1024), np.int8), np.empty(4, F32)
    assert not native.quantize_int8(
        x.reshape(1, 4, 1024), x.view(np.int8)[:4096].reshape(q3.shape), scale
    )
    assert not native.quantize_int8(x.reshape(1, 4, 1024), q3, x[:4])


BAD_CALLS = [
    ("transpose2d", lambda: (np.zeros((1, 4, 4), np.uint8), np.zeros((4, 4), np.uint8), True)),
    ("transpose2d", lambda: (np.zeros((4, 5), np.uint32), np.zeros((4, 5), np.uint32), True)),
    ("transpose2d", lambda: (np.zeros((4, 4), np.uint32), np.zeros((4, 4), np.uint16), True)),
    ("cast", lambda: ("float64", np.zeros(4, np.uint32), np.zeros(4, np.uint16))),
    ("cast", lambda: ("float16", np.zeros(4, np.uint32), np.zeros(5, np.uint16))),
    ("cast", lambda: ("float16", np.zeros(4, np.uint16), np.zeros(4, np.uint16))),
    ("lookup", lambda: (np.zeros(4, np.uint32), np.zeros(4, np.uint32), np.zeros(4, np.uint32))),
    ("lookup", lambda: (np.zeros(4, np.uint8), np.zeros(4, np.uint32), np.zeros(255, np.uint32))),
    (
        "quantize_int8",
        lambda: (
            np.zeros(4, np.uint32),
            "float32",
            None,
            1,
            4,
            1,
            np.zeros(3, np.int8),
            np.zeros(4, np.uint32),
        ),
    ),
    (
        "quantize_int8",
        lambda: (
            np.zeros(4, np.uint32),
            "float32",
            None,
            2**62 + 1,
            4,
            1,
            np.zeros(4, np.int8),
            np.zeros(4, np.uint32),
        ),
    ),
    (
        "quantize_int8",
        lambda: (
            np.zeros(4, np.uint16),
            "float16",
            None,
            1,
            4,
            1,
            np.zeros(4, np.int8),
            np.zeros(4, np.uint32),
        ),
    ),
    (
        "quantize_int8",
        lambda: (
            np.zeros(4, np.uint32),
            "float64",
            None,
            1,
            4,
            1,
            np.zeros(4, np.int8),
            np.zeros(4, np.uint32),
        ),
    ),
    (
        "quantize_int4",
        lambda: (
            np.zeros(12, np.uint32),
            "float32",
            None,
            2,
            6,
            4,
            np.zeros(6, np.uint8),
            np.zeros(2, np.uint32),
        ),
    ),
    (
        "quantize_int4",
        lambda: (
            np.zeros(12, np.uint32),
            "float32",
            None,
            2,
            6,
            3,
            np.zeros(5, np.uint8),
            np.zeros(4, np.uint32),
        ),
    ),
]


@native_only
@pytest.mark.parametrize(
    ("name", "arguments"), BAD_CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD_CALLS)]
)
def test_the_extension_refuses_bad_arguments_and_releases_every_buffer(
    name: str, arguments: Callable[[], tuple[Any, ...]]
) -> None:
    """Called directly, past the checks of native.py, every bad size, rank, item size, table or
    format raises ValueError (TypeError for a missing table), and no buffer stays exported (each
    array can still be resized)."""
    from lazyparams.runtime import _native

    args = arguments()
    with pytest.raises((ValueError, TypeError), match=r"expected|bytes-like"):
        getattr(_native, name)(*args)
    for arg in args:
        if isinstance(arg, np.ndarray):
            arg.resize(arg.size + 1, refcheck=False)


@native_only
def test_the_extension_says_whether_it_has_its_blocked_transposes() -> None:
    from lazyparams.runtime import _native

    assert _native.BLOCKED_TRANSPOSE in (0, 1)
    assert native.transpose_2d(np.zeros((8, 8), F32), np.zeros((8, 8), F32)) == bool(
        _native.BLOCKED_TRANSPOSE
    )
