"""The streamed strips of the compiled transpose (outputs declared large, rows a whole number of
cache lines apart, a CPU with AVX2) bit for bit against numpy and ml_dtypes.

A staged strip copies about a page of each of its input rows into a stage and transposes the
stage a cache line of columns at a time into whole output runs; a direct one (plain copies,
where the CPU is one they are tuned for) transposes tiles of 2 KiB of its rows straight from the
input while it prefetches the next tile. The rows before the first whole line of the output, and the last rows
short of a line, go to the blocked strips. The shapes
here are cut around those sizes for every item size: a full strip, a strip of a few lines, rows
left over; rows of one tile a little longer than a page and of three tiles, ending in a partial
line of columns. Each output is placed in a larger buffer, at offsets within a line and with
row strides that do and do not stream, and nothing outside it may change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.runtime import native

F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
PAGE = 4096

pytestmark = pytest.mark.skipif(
    not native.available(), reason="the compiled extension is not built (or LAZYPARAMS_NATIVE=0)"
)


@pytest.fixture(autouse=True)
def _native_on() -> Iterator[None]:
    with native.use_native(True):
        yield


def _strip_rows(size: int) -> int:
    """Input rows of a staged strip of `size`-byte items (transpose_stream.c's STREAM_ROWS;
    on AMD's CPUs 2-byte strips take half as many, a whole number of which these shapes hold
    too)."""
    return 512 // size if size >= 2 else 256


def _shapes(src: np.dtype[Any], dst: np.dtype[Any]) -> list[tuple[int, int]]:
    """(n, m) around the streamed strips' sizes: a full strip, one of a line and a few rows
    more; rows of 1.1 pages (one tile) and of 2.6 pages (three), each with a partial line of
    columns at the end."""
    line = 64 // dst.itemsize
    page = PAGE // max(src.itemsize, dst.itemsize)
    n = _strip_rows(dst.itemsize) + line + 3
    return [(n, page + page // 10 + line // 2 + 1), (n, 2 * page + page * 3 // 5 + 1)]


def _random(shape: tuple[int, int], dtype: np.dtype[Any], seed: int) -> np.ndarray:
    """Random bit patterns (NaNs, infinities and subnormals among them)."""
    raw = np.random.default_rng(seed).integers(0, 256, (*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.itemsize}")


def _placed(
    shape: tuple[int, int], dtype: np.dtype[Any], pad: int, offset: int
) -> tuple[np.ndarray, np.ndarray]:
    """A (rows, cols) view of a byte buffer filled with 0xA5: rows the smallest multiple of 64
    bytes that fits one plus `pad` apart, the first element `offset` bytes past a line."""
    rows, cols = shape
    row_bytes = -(-cols * dtype.itemsize // 64) * 64 + pad
    raw = np.full(rows * row_bytes + 128, 0xA5, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    view = raw[start : start + rows * row_bytes].view(dtype).reshape(rows, -1)[:, :cols]
    assert view.ctypes.data % 64 == offset
    return raw, view


# (row pad, offset): streamed with and without a head of rows before the first whole line,
# and rows not a multiple of 64 bytes apart (the blocked strips alone)
PLACEMENTS = [(0, 0), (0, 8), (0, 48), (64, 16), (16, 0)]


def _check_placements(src: np.ndarray, want: np.ndarray, transpose: Any) -> None:
    """`transpose(src, dst)` into each placement gives `want`, writing nothing outside dst."""
    for pad, offset in PLACEMENTS:
        if offset % want.itemsize:
            continue  # numpy's arrays are aligned to their items
        raw, dst = _placed(want.shape, want.dtype, pad, offset)
        assert transpose(src, dst), (pad, offset)
        np.testing.assert_array_equal(_bits(dst), _bits(want), f"pad {pad}, offset {offset}")
        _bits(dst)[...] = int.from_bytes(b"\xa5" * want.itemsize, "little")
        assert np.all(raw == 0xA5), f"wrote outside dst (pad {pad}, offset {offset})"


def _plain(src: np.ndarray, dst: np.ndarray) -> bool:
    return native.transpose_2d(src, dst, native.STREAM_BYTES)


def _converting(src: np.ndarray, dst: np.ndarray) -> bool:
    return native.transpose_cast_2d(src, dst, native.STREAM_BYTES)


def _astype(x: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.uint8), E4M3, F16, BF16, F32, F64], ids=str)
def test_streamed_transpose_matches_numpy(dtype: np.dtype[Any]) -> None:
    for n, m in _shapes(dtype, dtype):
        src = _random((n, m), dtype, m)
        _check_placements(src, np.ascontiguousarray(src.T), _plain)
    # the last shape with strided rows on the input side, and reversed rows on either
    want = np.ascontiguousarray(src.T)
    wide = np.empty((n, m + 7), dtype)
    wide[:, 5 : m + 5] = src
    _check_placements(wide[:, 5 : m + 5], want, _plain)
    _check_placements(src[::-1], np.ascontiguousarray(src[::-1].T), _plain)
    _, dst = _placed((m, n), dtype, 0, 0)
    assert _plain(src, dst[::-1])
    np.testing.assert_array_equal(_bits(dst[::-1]), _bits(want))


@pytest.mark.parametrize("rows", [1, 7, 64, 129, 300])
def test_streamed_transpose_of_few_or_odd_rows(rows: int) -> None:
    """Rows fewer than a strip, or than a line of output, and wide rows of several pages."""
    for dtype in (np.dtype(np.uint8), F16, F32, F64):
        src = _random((rows, 3 * PAGE // dtype.itemsize + 5), dtype, rows)
        _check_placements(src, np.ascontiguousarray(src.T), _plain)


CONVERSIONS = [
    (BF16, F16),  # converted in registers as the runs are streamed
    (F32, F16),
    (F32, BF16),
    (F32, E4M3),
    (F32, E5M2),
    (F16, F32),
    (BF16, F32),
    (F16, BF16),
    (E4M3, F32),
    (E5M2, F16),
    (F16, F64),
]


@pytest.mark.parametrize(("src_dtype", "dst_dtype"), CONVERSIONS, ids=str)
def test_streamed_converting_transpose_matches_astype(
    src_dtype: np.dtype[Any], dst_dtype: np.dtype[Any]
) -> None:
    if native.conversion(src_dtype, dst_dtype) is None:
        pytest.skip("numpy's own cast is the exact one here")
    for n, m in _shapes(src_dtype, dst_dtype):
        src = _random((n, m), src_dtype, n + m)
        _check_placements(src, np.ascontiguousarray(_astype(src, dst_dtype).T), _converting)
    flipped = src[::-1]
    _check_placements(flipped, np.ascontiguousarray(_astype(flipped, dst_dtype).T), _converting)


def test_streamed_bfloat16_to_float16_on_every_bit_pattern() -> None:
    """All 65536 bfloat16 patterns, transposed so that each run of sixteen mixes magnitudes
    (float16 normals, subnormals, overflow, zeros, NaNs), and shuffled: every pattern
    through both the rebias of float16's normal range and the CPU's conversion."""
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16)
    shuffled = np.random.default_rng(3).permutation(patterns)
    for x in (patterns.reshape(256, 256), shuffled.reshape(256, 256), patterns.reshape(512, 128)):
        want = np.ascontiguousarray(_astype(x, F16).T)
        _check_placements(x, want, _converting)
    # vectors of float16 normals but for one element each: the rare path within the common
    normal = _astype(np.linspace(-60000, 60000, 256 * 512, dtype=np.float32), BF16)
    normal = normal.reshape(256, 512)
    picked = patterns[np.arange(normal[::7, ::16].size) * 55 % patterns.size]
    normal[::7, ::16] = picked.reshape(normal[::7, ::16].shape)
    _check_placements(normal, np.ascontiguousarray(_astype(normal, F16).T), _converting)


# Direct strips --------------------------------------------------------------------------------


@pytest.fixture(params=["staged", "direct", "direct-avx2"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each kind of streamed strip for plain copies, whatever the CPU would pick: staged,
    direct (by the AVX-512 blocks where the CPU has them), and direct without AVX-512 (the
    AVX2 blocks of 4- and 8-byte items, the staged strips for the others)."""
    module = native._module()
    before = module.transpose_path(request.param.removesuffix("-avx2"))
    avx512 = module.use_avx512(not request.param.endswith("-avx2"))
    try:
        yield request.param
    finally:
        module.transpose_path(before)
        module.use_avx512(avx512)


def _check_plain_strided_reversed(src: np.ndarray) -> None:
    """The plain transpose of `src` at every placement, from `src` itself, from a copy whose
    rows are strided (a column each side), and from its rows reversed."""
    n, m = src.shape
    _check_placements(src, np.ascontiguousarray(src.T), _plain)
    wide = np.empty((n, m + 3), src.dtype)
    wide[:, 1 : m + 1] = src
    _check_placements(wide[:, 1 : m + 1], np.ascontiguousarray(src.T), _plain)
    _check_placements(src[::-1], np.ascontiguousarray(src[::-1].T), _plain)


@pytest.mark.parametrize("dtype", [F32, F64, np.dtype(np.int32), np.dtype(np.uint64)], ids=str)
def test_direct_and_staged_strips_match_numpy(dtype: np.dtype[Any], path: str) -> None:
    """Shapes around the direct tiles (128 bytes of rows, 2 KiB of columns): one strip and a
    line more, rows of 1.1 and 2.6 tiles ending in a partial line of columns (whose row ends
    may not be read past), a strip of a single line; strided and reversed input rows."""
    size, line = dtype.itemsize, 64 // dtype.itemsize
    rows, tile = 128 // size, 2048 // size
    for n, m in [
        (rows + line + 3, tile + tile // 10 + line // 2 + 1),
        (2 * rows + 1, 2 * tile + tile * 3 // 5 + 1),
        (line, 3 * tile - 1),
        (5 * rows, line + 1),
    ]:
        _check_plain_strided_reversed(_random((n, m), dtype, n * m))


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("dtype", [F16, BF16, np.dtype(np.int16)], ids=str)
def test_two_byte_blocks_match_numpy(dtype: np.dtype[Any], path: str, simd: bool) -> None:
    """Plain 2-byte copies: direct takes the AVX-512 blocks of 32 x 32 items where the CPU has
    them (direct tiles of 64 rows and 2 KiB straight from the input, a partial first or last
    line of columns through a block of its own; the blocks' output lines gathered into runs,
    the seams into a block of their own), staged the AVX2 ones, and without AVX2 the
    blocked loops. Rows of a strip and a block more, of one block, of a few rows past a block,
    of two direct tiles and a block; columns of one block, of whole blocks and of a partial
    last one, of tiles ending in a partial line; strided and reversed input rows; bfloat16 to
    float16 over the same shapes (its staged tiles of 128 rows)."""
    module = native._module()
    before = module.use_f16c(simd)
    try:
        for n, m in [
            (128 + 32 + 5, 32 * 40 + 7),
            (32, 32),
            (37, 96),
            (300, 2 * PAGE // 2 + 9),
            (2 * 64 + 32, 3 * 1024 - 5),
        ]:
            src = _random((n, m), dtype, n * m)
            _check_plain_strided_reversed(src)
            if dtype == BF16:  # random bits, and weights (float16 normals: the fast path)
                weights = np.random.default_rng(n).standard_normal((n, m), np.float32)
                for x in (src, weights.astype(BF16)):
                    half = np.ascontiguousarray(_astype(x, F16).T)
                    _check_placements(x, half, _converting)
    finally:
        module.use_f16c(before)


def _src_at(src: np.ndarray, offset: int) -> np.ndarray:
    """A copy of `src` whose first element lies `offset` bytes past a cache line (rows
    adjacent, so every row starts at its own offset within a line unless they are whole
    lines)."""
    n, m = src.shape
    raw = np.empty(src.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    placed = raw[start : start + src.nbytes].view(src.dtype).reshape(n, m)
    placed[...] = src
    return placed


def test_one_byte_blocks_match_numpy(path: str) -> None:
    """Plain 1-byte copies: direct takes the AVX-512 blocks of 64 x 64 where the CPU has them
    (direct tiles of 256 rows and 2 KiB straight from the input, their lines of columns
    starting on lines of the input, the columns before the first such and a partial last line
    through blocks of their own, the runs of each line of columns streamed while the next one's
    blocks run; the seams gathered into a block of their own), staged the AVX2 ones. Rows of a
    tile and a block more, of one block, of a few rows past a block, of three tiles; columns
    of one block, of tiles ending in a partial line; input rows starting at every offset
    within a line, strided and reversed."""
    for n, m in [(256 + 64 + 5, 2048 + 64 * 3 + 7), (64, 64), (70, 200), (3 * 256, 3 * 2048 - 5)]:
        src = _random((n, m), np.dtype(np.uint8), n + m)
        _check_plain_strided_reversed(src)
        for offset in (1, 16, 48, 63):
            placed = _src_at(src, offset)
            _check_placements(placed, np.ascontiguousarray(src.T), _plain)


def test_direct_strips_leave_conversions_to_the_stage(path: str) -> None:
    """Converting transposes take the staged strips either way (plain 1- and 2-byte copies
    the AVX-512 blocks where the path is direct and the CPU has them)."""
    for dtype in (np.dtype(np.uint8), F16):
        src = _random((300, 2 * PAGE // dtype.itemsize + 9), dtype, 7)
        _check_placements(src, np.ascontiguousarray(src.T), _plain)
    src = _random((300, 700), F16, 8)
    _check_placements(src, np.ascontiguousarray(_astype(src, F32).T), _converting)


def test_transpose_path_names() -> None:
    module = native._module()
    before = module.transpose_path("direct")
    try:
        assert module.transpose_path("staged") == "direct"
        assert module.transpose_path("auto") == "staged"
        with pytest.raises(ValueError, match="'auto', 'staged' or 'direct', got 'fast'"):
            module.transpose_path("fast")
        with pytest.raises(TypeError, match="path name"):
            module.transpose_path(1)
        assert module.transpose_path("auto") == "auto"
    finally:
        module.transpose_path(before)


# Seams ----------------------------------------------------------------------------------------


SEAM_CASES = [
    (np.dtype(np.uint8), np.dtype(np.uint8)),
    (F16, F16),
    (BF16, F16),  # converted in registers as the runs are streamed
    (F32, F32),
    (F64, F64),
    (F16, F32),  # converted as the seams are gathered
    (F32, BF16),
    (E4M3, F32),
]


@pytest.mark.parametrize(("src_dtype", "dst_dtype"), SEAM_CASES, ids=str)
def test_streamed_seams_of_adjacent_output_rows(
    src_dtype: np.dtype[Any], dst_dtype: np.dtype[Any], path: str
) -> None:
    """Output rows adjacent (a whole output, or a plane of one) and starting within a line:
    the last items of each row and the first of the next share a line, which the seams stream
    whole; the first row's head and the last row's tail, whose lines reach outside the output,
    go item by item. Rows of one, two and many lines, columns of one to a few pages."""
    if src_dtype != dst_dtype and native.conversion(src_dtype, dst_dtype) is None:
        pytest.skip("numpy's own cast is the exact one here")
    line = 64 // dst_dtype.itemsize
    transpose = _plain if src_dtype == dst_dtype else _converting
    for n, m in [
        (line, 2),
        (2 * line, 37),
        (_strip_rows(dst_dtype.itemsize) + 2 * line, 700),
        (3 * line, 2 * PAGE // max(src_dtype.itemsize, dst_dtype.itemsize) + 5),
        (line, 1),
    ]:
        src = _random((n, m), src_dtype, n + m)
        want = np.ascontiguousarray(_astype(src, dst_dtype).T)
        for offset in (8, 16, 48):
            if offset % dst_dtype.itemsize:
                continue
            raw, dst = _placed(want.shape, dst_dtype, 0, offset)
            assert dst.strides[0] == n * dst_dtype.itemsize  # rows adjacent
            assert transpose(src, dst)
            np.testing.assert_array_equal(_bits(dst), _bits(want), f"{n}x{m}, offset {offset}")
            _bits(dst)[...] = int.from_bytes(b"\xa5" * dst_dtype.itemsize, "little")
            assert np.all(raw == 0xA5), f"wrote outside dst ({n}x{m}, offset {offset})"
