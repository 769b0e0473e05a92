"""The compiled casts where their loops take other paths than on short arrays, bit for bit
against numpy's and ml_dtypes' own casts: outputs large enough to be streamed around the cache
(8 MiB or more, native.h's LP_CAST_STREAM_BYTES), the table lookups' among them, starting at
every offset from a 64-byte boundary (the head before the first aligned store), with a tail;
every 16-bit and 8-bit code in shuffled orders, so that each vector mixes the values its fast
path computes with the ones (zeros, subnormals, infinities, NaNs) it fixes or hands on;
float32 rounding classes exhaustively: every top 16 bits (bfloat16, float8) and every top 19
bits (float16) with the low bits that decide a tie; and the direct casts between the float8
formats and float16 and bfloat16 on every code."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.runtime import native
from tests.runtime.test_native import _float32_patterns
from tests.runtime.test_native_cast16 import LOOPS, loops

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
STREAM_BYTES = 8 << 20
"""Outputs of this many bytes or more are streamed (LP_CAST_STREAM_BYTES in native.h)."""

PAIRS = [
    (F32, F16),
    (F32, BF16),
    (F32, E4M3),
    (F32, E5M2),
    (BF16, F16),
    (BF16, F32),
    (F16, F32),
    (F16, BF16),
    (E4M3, F32),
    (E5M2, F32),
    (F16, F64),
    # table lookups, streamed where the entries are 8 bytes, in registers for byte codes
    (E4M3, F64),
    (E5M2, E4M3),
    (E4M3, E5M2),
    (F16, E4M3),
    (F16, E5M2),
    (BF16, E4M3),
    (BF16, E5M2),
    (E4M3, BF16),
    (E4M3, F16),
    (E5M2, F16),
]


@pytest.fixture(params=LOOPS)
def f16c(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test runs by the AVX-512 loops, the AVX2 ones and the portable ones."""
    with loops(request.param) as vector:
        yield vector


def _words(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _assert_same_bits(got: np.ndarray, want: np.ndarray, inputs: np.ndarray) -> None:
    bad = np.flatnonzero(_words(got) != _words(want))
    assert bad.size == 0, (
        f"{bad.size} differ, first at {bad[:4]}; inputs {[hex(v) for v in _words(inputs)[bad[:4]]]}"
        f": got {[hex(v) for v in _words(got)[bad[:4]]]}, "
        f"want {[hex(v) for v in _words(want)[bad[:4]]]}"
    )


def _cast(x: np.ndarray, dst: np.dtype[Any]) -> np.ndarray:
    """`x` cast by the compiled loop (which must take it), into an output filled with junk."""
    out = np.empty(x.shape, dst)
    _words(out).fill(0x5A)
    assert native.cast(x, out), f"{x.dtype} -> {dst} declined"
    return out


def _reference(x: np.ndarray, dst: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(dst)


def _codes(src: np.dtype[Any]) -> np.ndarray:
    """Every code of the 1- or 2-byte `src`, in order, as unsigned words."""
    return np.arange(1 << (8 * src.itemsize), dtype=np.uint32).astype(f"u{src.itemsize}")


@functools.cache
def _sources(src: np.dtype[Any]) -> np.ndarray:
    """Values of `src` worth casting: every code of a 1- or 2-byte format (shuffled), or the
    float32 patterns of `test_native` (edges, NaNs, ties of every target, random bits)."""
    if src == F32:
        return _float32_patterns()
    return np.random.default_rng(31).permutation(_codes(src)).view(src)


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=str)
def test_large_outputs_at_every_head_offset(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """Outputs past the streaming size, starting 0 to 63 bytes after a 64-byte boundary (the
    input at another offset), with a tail after the last whole vector: numpy's bits."""
    base = _sources(src)
    n = STREAM_BYTES // dst.itemsize + 37
    reps = -(-(n + 128) // base.size)
    tiled = np.tile(base, reps)
    want_all = _reference(tiled[: n + 128], dst)
    out_room = np.empty(n + 128, dst)
    size = dst.itemsize
    for shift in sorted({0, 1, 3, 16 // size, 31 // size, 32 // size, 47 // size, 63 // size}):
        start = shift + 5  # a different offset of the input
        x = tiled[start : start + n]
        # the output's offset from a 64-byte boundary, in elements
        lead = (-out_room.ctypes.data // size) % (64 // size)
        out = out_room[lead + shift : lead + shift + n]
        assert out.ctypes.data % 64 == shift * size and out.nbytes >= STREAM_BYTES
        _words(out).fill(0xA5)
        assert native.cast(x, out)
        _assert_same_bits(out, want_all[start : start + n], x)


@pytest.mark.parametrize(("src", "dst"), [p for p in PAIRS if p[0] != F32], ids=str)
def test_every_code_in_shuffled_orders(f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]) -> None:
    """Every code of the 1- or 2-byte source, in three random orders and sorted: numpy's and
    ml_dtypes' bits, wherever in a vector a special value falls."""
    codes = _codes(src)
    rng = np.random.default_rng(7)
    orders = [codes, *(rng.permutation(codes) for _ in range(3))]
    x = np.concatenate([np.tile(o, max(1, 4096 // o.size)) for o in orders]).view(src)
    _assert_same_bits(_cast(x, dst), _reference(x, dst), x)


def test_float16_normals_among_zeros_and_subnormals(f16c: bool) -> None:
    """Vectors of float16 normals holding a signed zero (which the 16-bit lanes fix) or a
    subnormal (which sends the vector through float32), at every lane, cast to bfloat16."""
    rng = np.random.default_rng(3)
    normal = rng.integers(0x0400, 0x7C00, 16 * 64, dtype=np.uint32).astype(np.uint16)
    normal |= rng.integers(0, 2, normal.size, dtype=np.uint32).astype(np.uint16) << 15
    for special in (0x0000, 0x8000, 0x0001, 0x83FF, 0x7C00, 0xFE01):
        x = normal.copy()
        x[np.arange(64) * 16 + np.arange(64) % 16] = special  # one a vector, every lane in turn
        _assert_same_bits(_cast(x.view(F16), BF16), _reference(x.view(F16), BF16), x)


@pytest.mark.parametrize("dst", [BF16, E4M3, E5M2], ids=str)
def test_float32_every_top_16_bits_with_each_tie_class(f16c: bool, dst: np.dtype[Any]) -> None:
    """Every float32 top 16 bits with low 16 bits of each class that can decide a rounding at
    bit 16 or above: zero, the lowest bit, just below half, half, just above, all."""
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    x = (top[:, None] | lows).reshape(-1).view(F32)
    _assert_same_bits(_cast(x, dst), _reference(x, dst), x)


def test_float32_to_float16_every_top_19_bits_with_each_tie_class(f16c: bool) -> None:
    """float16 rounds at bit 13 (more for its subnormals): every top 19 bits of a float32 with
    low 13 bits zero, one, just below half, half, just above and all ones."""
    top = np.arange(1 << 19, dtype=np.uint32) << 13
    lows = np.array([0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF], np.uint32)
    x = (top[:, None] | lows).reshape(-1).view(F32)
    _assert_same_bits(_cast(x, F16), _reference(x, F16), x)


@pytest.mark.parametrize("src", [BF16, F16], ids=str)
@pytest.mark.parametrize("dst", [E4M3, E5M2], ids=str)
def test_16_bit_floats_to_float8_rounded_once(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """The extension's direct float16 and bfloat16 to float8 casts (`cast16`, rounded once,
    in 16-bit lanes or through float32): every code, in order and shuffled, short and past the
    streaming size at an unaligned start, as ml_dtypes casts them."""
    from lazyparams.runtime import _native

    codes = _codes(src)
    x = np.concatenate([codes, np.random.default_rng(9).permutation(codes)])
    big = np.tile(x, -(-STREAM_BYTES // x.size) + 1)[3:]
    for words in (x, x[5:1000], big):
        got = np.full(words.size + 1, 0x5A, np.uint8)[1:]
        _native.cast16(f"{src}>{dst}", words, got)
        _assert_same_bits(got.view(dst), _reference(words.view(src), dst), words)


def _float8_normals(src: np.dtype[Any], dst: np.dtype[Any], n: int, seed: int) -> np.ndarray:
    """`n` random `src` codes, either sign, whose values are normal and finite in the float8
    `dst` (the vectors the casts' fast paths take)."""
    rng = np.random.default_rng(seed)
    info = ml_dtypes.finfo(dst)
    low, high = np.log2(float(info.smallest_normal)), np.log2(float(info.max))
    values = np.exp2(rng.uniform(low, high, n)) * rng.choice([-1.0, 1.0], n)
    codes = _words(values.astype(src))
    return codes[(codes & 0x7FFF) >= _words(np.array(info.smallest_normal, src))]


@pytest.mark.parametrize("src", [BF16, F16], ids=str)
@pytest.mark.parametrize("dst", [E4M3, E5M2], ids=str)
def test_16_bit_floats_to_float8_every_code_among_normals(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """Every 16-bit code alone in a run of 32 values otherwise normal in the target (a vector
    of the AVX2 loop, which takes a shorter path where all 32 are), at two lanes in turn."""
    from lazyparams.runtime import _native

    codes = _codes(src)
    normals = _float8_normals(src, dst, 40 * codes.size, 21)[: 32 * codes.size]
    for lane in (codes % 32, (codes * 7 + 3) % 32):
        x = normals.copy()
        x[np.arange(codes.size) * 32 + lane] = codes
        got = np.full(x.size, 0x5A, np.uint8)
        _native.cast16(f"{src}>{dst}", x, got)
        _assert_same_bits(got.view(dst), _reference(x.view(src), dst), x)


@pytest.mark.parametrize("src", [BF16, F16], ids=str)
@pytest.mark.parametrize("dst", [E4M3, E5M2], ids=str)
def test_16_bit_floats_to_float8_at_every_short_length_and_offset(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """Lengths 0 to 99 from four input offsets into an unaligned output (heads and tails
    around the whole vectors), normal values with a subnormal, an infinity or a NaN among
    them: ml_dtypes' bits, and nothing written past the end."""
    from lazyparams.runtime import _native

    x = _float8_normals(src, dst, 200, 4)[:160]
    x[[5, 40, 77, 101]] = _words(np.array([1e-7, np.inf, np.nan, -1e-9], np.float32).astype(src))
    for start in range(4):
        for n in range(100):
            words = x[start : start + n]
            room = np.full(n + 2, 0x5A, np.uint8)
            _native.cast16(f"{src}>{dst}", words, room[1 : n + 1])
            _assert_same_bits(room[1 : n + 1].view(dst), _reference(words.view(src), dst), words)
            assert room[0] == 0x5A and room[-1] == 0x5A, f"wrote outside {n} codes"


@pytest.mark.parametrize("src", [E4M3, E5M2], ids=str)
@pytest.mark.parametrize("dst", [F16, BF16], ids=str)
def test_float8_to_16_bit_floats_exactly(
    f16c: bool, src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """The extension's direct float8 to float16 and bfloat16 casts (`cast8`, NaNs from the
    table): every code, in order and shuffled, short and past the streaming size at an
    unaligned start, as ml_dtypes casts them."""
    from lazyparams.runtime import _native

    codes = _codes(src)
    rng = np.random.default_rng(13)
    x = np.concatenate([codes, *(rng.permutation(codes) for _ in range(16))])
    table = _words(_reference(codes.view(src), dst))
    big = np.tile(x, -(-STREAM_BYTES // (2 * x.size)) + 1)[7:]
    for words in (x, x[3:100], big):
        got = np.full(words.size + 1, 0x5A5A, np.uint16)[1:]
        _native.cast8(f"{src}>{dst}", words, got, table)
        _assert_same_bits(got.view(dst), _reference(words.view(src), dst), words)


def test_a_float8_table_of_the_wrong_item_size_is_refused() -> None:
    from lazyparams.runtime import _native

    codes, out = np.zeros(8, np.uint8), np.zeros(8, np.uint16)
    with pytest.raises(ValueError, match="table of 2-byte items"):
        _native.cast8("float8_e4m3fn>bfloat16", codes, out, np.zeros(256, np.uint32))
    with pytest.raises(ValueError, match="out of 2-byte items"):
        _native.cast8(
            "float8_e5m2>float16", codes, np.zeros(8, np.uint32), np.zeros(256, np.uint16)
        )


DIRECT_PAIRS = [(s, d) for s in (F16, BF16) for d in (E4M3, E5M2)]
DIRECT_PAIRS += [(s, d) for s in (E4M3, E5M2) for d in (F16, BF16)]
DIRECT_PAIRS += [(E4M3, E5M2), (E5M2, E4M3), (F16, F64)]


@pytest.mark.parametrize(("src", "dst"), DIRECT_PAIRS, ids=lambda d: str(d))
def test_the_direct_16_bit_and_float8_casts_run_computed_and_exact(
    src: np.dtype[Any], dst: np.dtype[Any]
) -> None:
    """`native.cast` runs these pairs by their computed loops (not a table), every code as
    ml_dtypes gives it; a converting transpose of the same pair takes the table instead (its
    tiles convert by the kinds the transposes know), bit for bit the same."""
    if not native.enabled():
        pytest.skip("the compiled extension is not built")
    codes = np.arange(1 << (8 * src.itemsize), dtype=np.uint32).astype(f"u{src.itemsize}")
    x = np.tile(codes, 3)[: 3 * codes.size - 5].view(src)
    out = np.empty(x.shape, dst)
    kind = native.conversion(src, dst)
    assert kind is not None and kind[0] == f"{src}>{dst}"
    assert native.cast(x, out)
    with np.errstate(all="ignore"):
        want = x.astype(dst)
    assert np.array_equal(out.view(f"u{dst.itemsize}"), want.view(f"u{dst.itemsize}"))
    grid = np.resize(x, 97 * 131).reshape(97, 131)
    moved = np.empty((131, 97), dst)
    assert native.transpose_cast_2d(grid, moved)
    with np.errstate(all="ignore"):
        expected = np.ascontiguousarray(grid.T).astype(dst)
    assert np.array_equal(moved.view(f"u{dst.itemsize}"), expected.view(f"u{dst.itemsize}"))
