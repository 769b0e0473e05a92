"""GGML block kernels against ggml's own reference (libggml-base) and gguf-py, bit for bit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from lazyparams.block_types import BLOCK_TYPES, QUANTIZABLE
from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import gguf_legacy, native, native_gguf
from lazyparams.runtime.gguf_quants import DEQUANTIZE, QUANTIZE
from lazyparams.runtime.kernels import run_kernel
from tests.runtime.ggml_oracle import require_oracle

Array = np.ndarray[Any, Any]
LEGACY = gguf_legacy.TYPES
F32 = np.float32


def _ggml(type_name: str) -> GGMLQuantizationType:
    return GGMLQuantizationType(BLOCK_TYPES[type_name].ggml_id)


def random_rows(seed: int = 0, rows: int = 16, n: int = 256) -> Array:
    return np.random.default_rng(seed).standard_normal((rows, n)).astype(F32)


def real_looking(seed: int = 1) -> Array:
    """Weights as trained layers have them: small, heavy-tailed, with a few large channels."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_t(4, (32, 512)) * 0.02).astype(F32)
    w[:, rng.integers(0, 512, 6)] *= 30
    return w


def adversarial() -> Iterator[tuple[str, Array]]:
    """Inputs where float32 details decide the bytes."""
    rng = np.random.default_rng(7)
    zeros = rng.standard_normal((8, 128)).astype(F32)
    zeros[:, :32] = 0
    zeros[1, 32:64] = -0.0
    zeros[2, 64:96] = np.where(np.arange(32) % 2, -0.0, 0.0)
    yield "zero blocks", zeros
    outlier = (rng.standard_normal((8, 128)) * 0.01).astype(F32)
    outlier[np.arange(8), rng.integers(0, 128, 8)] = [1e4, -1e4, 3e7, -3e7, 1, -1, 65504, 1e-3]
    yield "one outlier a block", outlier
    yield "subnormals", (rng.standard_normal((8, 128)) * 1e-39).astype(F32)
    yield "tiny normals", (rng.standard_normal((8, 128)) * 1e-37).astype(F32)
    big = np.full((4, 64), np.finfo(F32).max, F32)
    big[:, 1::3] *= -1
    yield "max magnitudes", big
    yield (
        "min normals",
        np.full((2, 64), np.finfo(F32).tiny, F32)
        * np.sign(rng.standard_normal((2, 64))).astype(F32),
    )
    yield "ties after scaling", (rng.integers(-127, 128, (8, 128)) + F32(0.5)).astype(F32)
    ties = rng.integers(-16, 16, (8, 128)).astype(F32) / F32(2)
    ties[:, ::32] = 8  # the block maximum makes the scale exactly 8 / 127, 8 / -8, ...
    yield "half steps", ties
    few = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.0], F32)
    yield "signed zeros and repeated extremes", rng.choice(few, size=(16, 128)).astype(F32)


def cases() -> Iterator[tuple[str, Array]]:
    yield "random", random_rows()
    yield "real-looking", real_looking()
    yield from adversarial()


CASES = list(cases())


@pytest.mark.parametrize("type_name", LEGACY)
@pytest.mark.parametrize("case", [name for name, _ in CASES])
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "native"])
def test_legacy_bytes_equal_ggml_reference(type_name: str, case: str, compiled: bool) -> None:
    oracle = require_oracle()
    if compiled and not native.available():
        pytest.skip("the compiled extension is not built")
    x = dict(CASES)[case]
    with native.use_native(compiled):
        got = QUANTIZE[type_name](x)
    expected = oracle.quantize(type_name, x)
    assert got.dtype == np.uint8 and got.shape == expected.shape
    assert np.array_equal(got, expected), np.argwhere(got != expected)[:4].tolist()


@pytest.mark.parametrize("type_name", LEGACY)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_legacy_bytes_equal_gguf_py(type_name: str, seed: int) -> None:
    x = random_rows(seed) if seed else real_looking()
    assert np.array_equal(QUANTIZE[type_name](x), gguf_quantize(x, _ggml(type_name)))


def test_gguf_py_differs_from_ggml_on_signed_zero_scales() -> None:
    """Why the adversarial inputs are compared with ggml, not gguf-py: a q4_0 block of -0.0
    keeps ggml's starting max +0.0, so d = +0.0 / -8 = -0.0; gguf-py takes the -0.0 itself."""
    zeros = np.full((1, 32), -0.0, F32)
    assert QUANTIZE["q4_0"](zeros)[0, :2].tolist() == [0x00, 0x80]
    assert gguf_quantize(zeros, _ggml("q4_0"))[0, :2].tolist() == [0x00, 0x00]


@pytest.mark.parametrize("type_name", LEGACY)
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "native"])
def test_legacy_dequantize_equals_ggml_and_gguf_py(type_name: str, compiled: bool) -> None:
    oracle = require_oracle()
    if compiled and not native.available():
        pytest.skip("the compiled extension is not built")
    for _, x in CASES:
        q = oracle.quantize(type_name, x)
        with native.use_native(compiled):
            got = DEQUANTIZE[type_name](q, x.shape[1])
        assert got.dtype == F32 and got.shape == x.shape
        with np.errstate(all="ignore"):
            reference = gguf_dequantize(q, _ggml(type_name))
        assert np.array_equal(got.view(np.uint32), reference.view(np.uint32))
        assert np.array_equal(
            got.view(np.uint32), oracle.dequantize(type_name, q, x.shape[1]).view(np.uint32)
        )


def _valid_blocks(type_name: str, rows: int, seed: int) -> Array:
    """Random blocks of `type_name` whose float16 scales are finite: gguf-py's own quantizer
    where it has one, else random bytes with the scale fields made small and finite."""
    block = BLOCK_TYPES[type_name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, block.block_size * 2)).astype(F32)
    try:
        return np.asarray(gguf_quantize(x, _ggml(type_name)))
    except NotImplementedError:
        pass
    raw = rng.integers(0, 256, (rows, block.type_size * 2), dtype=np.uint8)
    halves = raw.reshape(-1, 2)
    halves[:, 1] &= 0x3B  # every aligned 2-byte field a finite float16 below 1
    return raw


@pytest.mark.parametrize("type_name", sorted(BLOCK_TYPES))
def test_every_dequantizer_equals_gguf_py(type_name: str) -> None:
    q = _valid_blocks(type_name, 4, seed=3)
    n = BLOCK_TYPES[type_name].logical_shape(q.shape)[-1]
    got = DEQUANTIZE[type_name](q, n)
    with np.errstate(all="ignore"):
        expected = np.asarray(gguf_dequantize(q, _ggml(type_name)), F32)
    assert got.shape == (4, n)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_registry_covers_the_table() -> None:
    assert set(DEQUANTIZE) == set(BLOCK_TYPES)
    assert set(LEGACY) <= set(QUANTIZE) == QUANTIZABLE


# The op kernels --------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", LEGACY)
def test_kernel_in_chunks_equals_whole_rows(type_name: str) -> None:
    x = np.random.default_rng(5).standard_normal((300, 1024)).astype(F32)  # several chunks
    whole = QUANTIZE[type_name](x)
    got = run_kernel("quantize_gguf", [x], {"type": type_name})
    assert np.array_equal(got, whole)
    back = run_kernel("dequantize_gguf", [got], {"type": type_name, "dtype": "float32"})
    assert np.array_equal(back, DEQUANTIZE[type_name](whole, 1024))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_floats_are_widened_first(dtype: Any) -> None:
    x = random_rows(4).astype(dtype)
    got = run_kernel("quantize_gguf", [x], {"type": "q8_0"})
    assert np.array_equal(got, QUANTIZE["q8_0"](x.astype(F32)))


@pytest.mark.parametrize("type_name", LEGACY)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_narrow_floats_convert_inside_the_compiled_loop(type_name: str, dtype: Any) -> None:
    """16-bit rows go to the compiled loop whole (it converts a group of blocks at a time):
    the bytes of the float32 values, over groups and a tail; a NaN in a late group is found."""
    x = (np.random.default_rng(7).standard_normal((3, 32 * 150)) * 4).astype(dtype)
    want = QUANTIZE[type_name](x.astype(F32))
    out = np.empty_like(want)
    assert native_gguf.quantize_legacy(type_name, x, out) == (-1 if native.enabled() else None)
    for compiled in (False, True):
        with native.use_native(compiled):
            assert np.array_equal(run_kernel("quantize_gguf", [x], {"type": type_name}), want)
    x[2, 32 * 140 + 5] = np.nan
    with pytest.raises(RuntimeExecError, match=f"flat index {2 * 32 * 150 + 32 * 140 + 5};"):
        run_kernel("quantize_gguf", [x], {"type": type_name})


def test_dequantize_to_narrow_floats_rounds_float32_values() -> None:
    q = QUANTIZE["q4_1"](random_rows(6))
    got = run_kernel("dequantize_gguf", [q], {"type": "q4_1", "dtype": "bfloat16"})
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.array_equal(got, DEQUANTIZE["q4_1"](q, 256).astype(ml_dtypes.bfloat16))


def test_kernel_keeps_leading_dims() -> None:
    x = np.random.default_rng(2).standard_normal((2, 3, 64)).astype(F32)
    got = run_kernel("quantize_gguf", [x], {"type": "q5_0"})
    assert got.shape == (2, 3, 44)
    assert np.array_equal(got.reshape(6, 44), QUANTIZE["q5_0"](x.reshape(6, 64)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "native"])
def test_non_finite_input_is_refused(bad: float, compiled: bool) -> None:
    x = random_rows(8, rows=4, n=64)
    x[2, 33] = bad
    with native.use_native(compiled), pytest.raises(RuntimeExecError) as err:
        run_kernel("quantize_gguf", [x], {"type": "q8_0"})
    assert "expected finite values to quantize to q8_0" in str(err.value)
    assert "flat index 161" in str(err.value)


def test_kernel_refuses_bad_operands() -> None:
    with pytest.raises(RuntimeExecError, match="multiple of 32"):
        run_kernel("quantize_gguf", [np.zeros((2, 48), F32)], {"type": "q8_0"})
    with pytest.raises(RuntimeExecError, match="float dtype"):
        run_kernel("quantize_gguf", [np.zeros((2, 32), np.int32)], {"type": "q8_0"})
    with pytest.raises(RuntimeExecError, match="uint8 rows of q8_0 blocks"):
        run_kernel("dequantize_gguf", [np.zeros((2, 33), np.uint8)], {"type": "q8_0"})
    with pytest.raises(RuntimeExecError, match="with a quantizer, got iq2_xs"):
        run_kernel("quantize_gguf", [np.zeros((1, 256), F32)], {"type": "iq2_xs"})


@pytest.mark.parametrize("type_name", LEGACY)
@pytest.mark.parametrize("compiled", [False, True], ids=["numpy", "native"])
def test_legacy_quantizers_called_directly_refuse_what_they_cannot_encode(
    type_name: str, compiled: bool
) -> None:
    """As the k-quants' QUANTIZE and DEQUANTIZE: rows of a partial block (which would lose
    their values), other dtypes or ranks; bytes that are not uint8, or not the blocks of n."""
    size = BLOCK_TYPES[type_name].type_size
    with native.use_native(compiled):
        for x, match in [
            (np.ones((2, 16), F32), "multiple of 32 values, got 16"),
            (np.ones((2, 48), F32), "multiple of 32 values, got 48"),
            (np.ones((2, 32), np.float64), "float32 rows \\(rank 2\\), got float64 of rank 2"),
            (np.ones(64, F32), "float32 rows \\(rank 2\\), got float32 of rank 1"),
            ([[1.0] * 32], "got list"),
        ]:
            with pytest.raises(RuntimeExecError, match=match):
                QUANTIZE[type_name](x)  # type: ignore[arg-type]
        for q, n, match in [
            (np.zeros((2, size), F32), 32, "expects uint8 rows"),
            (np.zeros((2, 27), np.uint8), 48, "expects uint8 rows and n a multiple of 32"),
            (np.zeros((2, size + 1), np.uint8), 32, f"take {size} bytes, got {size + 1}"),
            (np.zeros(size, np.uint8), 32, "expects uint8 rows"),
        ]:
            with pytest.raises(RuntimeExecError, match=match):
                DEQUANTIZE[type_name](q, n)


@pytest.mark.skipif(not native.available(), reason="the compiled extension is not built")
def test_the_compiled_legacy_loop_refuses_bad_kinds_and_item_sizes() -> None:
    """Called directly: a kind other than the 16-bit casts to float32, or items of another size
    than the kind reads, raise ValueError naming what was expected."""
    from lazyparams.runtime import _native

    out = np.zeros(34, np.uint8)
    with pytest.raises(ValueError, match="expected kind '', 'bfloat16>float32'"):
        _native.quantize_legacy("q8_0", np.zeros(32, np.uint16), out, "float32>float16")
    with pytest.raises(ValueError, match="expected"):
        _native.quantize_legacy("q8_0", np.zeros(32, np.uint32), out, "bfloat16>float32")
    with pytest.raises(ValueError, match="expected"):
        _native.quantize_legacy("q8_0", np.zeros(32, np.uint16), out)
    assert _native.quantize_legacy("q8_0", np.zeros(32, np.uint16), out, "float16>float32") == -1
