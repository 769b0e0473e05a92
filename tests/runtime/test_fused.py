"""The `layout_cast` kernel against numpy's concatenate, transpose and astype, bit for bit: every
float dtype pair, joins along each axis, 2-D and N-D permutations, strided parts, special
values (NaN payloads, infinities, subnormals, overflow), with and without the compiled loops."""

from __future__ import annotations

import itertools
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import native, run_kernel

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16, E4M3, E5M2, np.dtype(np.float64)]
SPECIAL_BITS = [
    0x7FC00000,
    0x7F800001,
    0xFF802000,
    0x7F800000,
    0xFF800000,
    0x00000001,
    0x80400000,
    0x33800000,
    0x477FF000,
    0x47800000,
    0x43E00000,
    0x3F808000,
]
"""float32 NaNs (quiet, signalling, with payloads), infinities, subnormals, values that round
to a boundary or overflow float16 and float8, and a tie."""


def values(shape: tuple[int, ...], dtype: np.dtype[Any], seed: int) -> np.ndarray[Any, Any]:
    """Random values of `dtype` with special float32 patterns sprinkled in."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 100).astype(np.float32)
    flat = x.reshape(-1)
    where = rng.integers(0, flat.size, size=min(flat.size, 64))
    flat[where] = np.array(SPECIAL_BITS, np.uint32).view(np.float32)[where % len(SPECIAL_BITS)]
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def reference(parts: list[Any], axis: int, axes: tuple[int, ...], dtype: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.concatenate(parts, axis).transpose(axes).astype(dtype)


def check(parts: list[Any], axis: int, axes: tuple[int, ...], dtype: Any) -> None:
    want = reference(parts, axis, axes, dtype)
    got = run_kernel(
        "layout_cast", [tuple(parts)], {"axis": axis, "axes": axes, "dtype": str(dtype)}
    )
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (parts[0].dtype, dtype, axis, axes)
    assert got.flags.c_contiguous


LAYOUTS = [
    ([(37, 53), (5, 53)], 0, (1, 0)),  # odd sizes: edges of the register blocks
    ([(64, 256), (64, 256), (16, 256)], 0, (1, 0)),  # q, k, v
    ([(33, 17), (33, 5)], 1, (1, 0)),
    ([(130, 70), (10, 70)], 0, (0, 1)),  # a cast into slices
    ([(6, 40), (6, 24)], 1, (0, 1)),  # a cast into strided row blocks
    ([(3, 4, 5), (3, 2, 5)], 1, (2, 0, 1)),
    ([(2, 3, 64), (2, 3, 64)], 2, (0, 2, 1)),
]


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(DTYPES, DTYPES)))
@pytest.mark.parametrize("compiled", [True, False])
def test_layout_cast_matches_numpy_for_every_dtype_pair(
    src: np.dtype[Any], dst: np.dtype[Any], compiled: bool
) -> None:
    with native.use_native(compiled):
        for seed, (shapes, axis, axes) in enumerate(LAYOUTS):
            check([values(s, src, seed + i) for i, s in enumerate(shapes)], axis, axes, dst)


def test_large_transposes_stream_and_match() -> None:
    """Outputs past the streaming threshold take the streamed stores."""
    parts = [values((1024, 2056), BF16, 1), values((256, 2056), BF16, 2)]
    check(parts, 0, (1, 0), np.dtype(np.float16))
    check([values((1536, 1030), np.float32, 3)], 0, (1, 0), E5M2)


def test_strided_and_mixed_parts() -> None:
    """Parts that are views with strided rows, and parts of different dtypes."""
    base = values((40, 96), np.float32, 4)
    check([base[:, :48], base[:, 48:]], 0, (1, 0), np.dtype(np.float16))
    mixed = [values((8, 32), np.float32, 5), values((8, 32), np.float16, 6)]
    check(mixed, 0, (1, 0), BF16)


def test_every_float8_code_transposes_bit_exactly() -> None:
    """All 256 codes of each float8, and all float32 values they give, round trip."""
    for dtype in (E4M3, E5M2):
        codes = np.arange(256, dtype=np.uint8).view(dtype).reshape(16, 16)
        check([codes], 0, (1, 0), np.dtype(np.float32))
        check([codes.astype(np.float32)], 0, (1, 0), dtype)


def test_bad_operands_are_refused() -> None:
    a, b = np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)
    with pytest.raises(RuntimeExecError, match="dims off axis 0 agree"):
        run_kernel("layout_cast", [(a, b)], {"axis": 0, "axes": (1, 0), "dtype": "float16"})
    with pytest.raises(RuntimeExecError, match="permutation"):
        run_kernel("layout_cast", [(a,)], {"axis": 0, "axes": (0, 0), "dtype": "float16"})


def test_the_compiled_transpose_refuses_mismatched_conversions() -> None:
    if not native.available() or not native.enabled():
        pytest.skip("the compiled loops are not built")
    module: Any = native._MODULE
    src, dst = np.zeros((4, 4), np.uint16), np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match="conversion kind"):
        module.transpose2d(src, dst, False, "float16")
    with pytest.raises(ValueError, match="conversion kind"):
        module.transpose2d(src, dst, False, "nonsense")


@pytest.mark.parametrize("wide_blocks", [True, False])
def test_converting_transposes_in_every_placement(wide_blocks: bool) -> None:
    """The converting transpose into slices at odd offsets of a larger output, streamed and
    through the cache, by the AVX2 blocks and by the SSE ones alone."""
    if not native.available() or not native.enabled():
        pytest.skip("the compiled loops are not built")
    module: Any = native._MODULE
    before = module.use_f16c(wide_blocks)
    try:
        for src_dtype, dst_dtype in ((BF16, np.dtype(np.float16)), (np.float32, E4M3)):
            x = values((203, 517), np.dtype(src_dtype), 7)
            for offset, total in itertools.product((0, 1, 3, 8), (None, native.STREAM_BYTES)):
                out = np.zeros((517, 203 + 11), dst_dtype)
                dst = out[:, offset : offset + 203]
                assert native.transpose_cast_2d(x, dst, total)
                want = reference([x], 0, (1, 0), dst_dtype)
                assert dst.tobytes() == np.ascontiguousarray(want).tobytes(), (offset, total)
                rest = np.delete(
                    out.view(np.uint8 if out.itemsize == 1 else np.uint16),
                    np.s_[offset : offset + 203],
                    axis=1,
                )
                assert not rest.any(), "wrote outside its slice"
    finally:
        module.use_f16c(before)
