"""ggml's K-quants (`runtime.gguf_kquants`) byte for byte against ggml's own reference
quantizers and dequantizers (the `libggml-python` wheel, through ctypes) and gguf-py's
dequantizers, on both paths: the numpy code and the compiled loops.

Inputs: random normal rows at scales from 1e-30 to 1e30, adversarial blocks (all zero, zero
sub-blocks, one huge outlier, subnormals, ties, all equal, all negative, tiny ranges) and
weight-like rows. Tests needing the oracle are skipped with a message where it cannot load.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.runtime import gguf_kquants, native, native_gguf

KINDS = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
GGML_NAME = {kind: kind[:-1] + "K" for kind in KINDS}  # q4_k -> q4_K


@functools.cache
def _ggml() -> ctypes.CDLL | None:
    """ggml's base library from the `libggml-python` wheel, or None where it cannot load."""
    spec = importlib.util.find_spec("libggml")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "lib64" / "libggml-base.so"
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    for kind in KINDS:
        for name in (f"quantize_row_{GGML_NAME[kind]}_ref", f"dequantize_row_{GGML_NAME[kind]}"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            getattr(lib, name).restype = None
    return lib


def oracle() -> ctypes.CDLL:
    """The loaded library, or a skip saying what to install."""
    lib = _ggml()
    if lib is None:
        pytest.skip(
            "ggml's reference library did not load: pip install libggml-python (test extra)"
        )
    return lib


def ggml_quantize(kind: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """ggml's quantize_row_<kind>_ref over all rows (they are whole super-blocks)."""
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros((x.shape[0], x.shape[1] // 256 * gguf_kquants.TYPE_SIZE[kind]), np.uint8)
    getattr(oracle(), f"quantize_row_{GGML_NAME[kind]}_ref")(x.ctypes.data, out.ctypes.data, x.size)
    return out


def ggml_dequantize(kind: str, q: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    """ggml's dequantize_row_<kind> over all rows."""
    out = np.zeros((q.shape[0], n), np.float32)
    getattr(oracle(), f"dequantize_row_{GGML_NAME[kind]}")(q.ctypes.data, out.ctypes.data, out.size)
    return out


# Inputs --------------------------------------------------------------------------------------


def _adversarial(rng: np.random.Generator) -> Iterator[np.ndarray[Any, Any]]:
    """Super-blocks (256 values each) built to hit ggml's edge cases."""
    normal = rng.standard_normal(256).astype(np.float32)
    yield np.zeros(256, np.float32)
    yield np.full(256, -0.0, np.float32)
    holes = normal.copy()
    holes[16:48] = 0
    holes[200:216] = 0
    yield holes
    for huge in (1e4, 1e20, 3e38, -3e38):
        spike = normal.copy()
        spike[rng.integers(256)] = huge
        yield spike
    yield (normal * 1e-40).astype(np.float32)  # subnormals
    yield np.full(256, 1e-45, np.float32)
    yield np.tile(np.arange(-8, 8, dtype=np.float32) * 0.5, 16)  # ties at many scales
    yield np.tile(np.array([1, 3, 5, 7, -1, -3, -5, -7], np.float32), 32)
    yield np.full(256, 0.37, np.float32)
    yield np.full(256, -2.5, np.float32)
    yield -np.abs(normal)
    yield np.abs(normal) + 5
    yield (1.0 + normal * 1e-6).astype(np.float32)  # tiny range far from zero
    yield (normal * 1e-14).astype(np.float32)  # around GROUP_MAX_EPS
    yield np.repeat(normal[:16], 16)
    yield np.where(normal > 0, 1.0, -1.0).astype(np.float32)


def _mixed(rng: np.random.Generator, blocks: int) -> np.ndarray[Any, Any]:
    """Super-blocks at scales from 1e-40 to 1e38, each normal, on a grid of ties, one-signed,
    of few levels or sparse."""
    scale = 10.0 ** rng.uniform(-40, 38, (blocks, 1))
    style = rng.integers(0, 5, (blocks, 1))
    base = rng.standard_normal((blocks, 256))
    base = np.where(style == 1, np.round(base * 4) / 4, base)
    base = np.where(style == 2, np.abs(base), base)
    base = np.where(style == 3, rng.integers(-3, 4, (blocks, 256)), base)
    base = np.where((style == 4) & (rng.random((blocks, 256)) < 0.2), 0, base)
    return np.clip(base * scale, -3.4e38, 3.4e38).astype(np.float32)


def inputs() -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
    """(name, float32 rows) cases for the bit-identity tests."""
    rng = np.random.default_rng(13)
    for scale in (1e-30, 1e-8, 0.02, 1.0, 300.0, 1e30):
        yield f"normal*{scale:g}", (rng.standard_normal((16, 512)) * scale).astype(np.float32)
    blocks = list(_adversarial(rng))
    yield "adversarial", np.stack(blocks).astype(np.float32).reshape(len(blocks), 256)
    yield "mixed", _mixed(rng, 300).reshape(100, 768)
    yield "odd block count", rng.standard_normal((3, 768)).astype(np.float32)
    weights = rng.standard_t(4, (64, 1024)) * 0.02 * np.exp(rng.normal(0, 0.5, (64, 1)))
    weights[:, rng.integers(1024, size=4)] *= 20  # outlier columns, as in real projections
    yield "weights", weights.astype(np.float32)


CASES = list(inputs())
PATHS = [
    pytest.param(False, id="numpy"),
    pytest.param(
        True,
        id="native",
        marks=pytest.mark.skipif(not native.available(), reason="extension not built"),
    ),
]


def _assert_same_bytes(ours: np.ndarray[Any, Any], ggml: np.ndarray[Any, Any], what: str) -> None:
    """Equal bytes, else the first differing block's bytes in the message."""
    if not np.array_equal(ours, ggml):
        row, col = np.argwhere(ours != ggml)[0]
        raise AssertionError(f"{what}: first difference at row {row}, byte {col}")


@pytest.mark.skipif(not native.available(), reason="extension not built")
@pytest.mark.parametrize("kind", KINDS)
def test_compiled_loops_run(kind: str) -> None:
    """The compiled loops take the work (so the native cases below test them, not numpy) and
    say False for an infinity; they decline arrays they cannot take."""
    x = CASES[-1][1][:4]
    out = np.zeros((4, 4 * gguf_kquants.TYPE_SIZE[kind]), np.uint8)
    assert native_gguf.quantize_gguf_k(kind, x, out) is True
    assert out.any()
    floats = np.zeros_like(x)
    assert native_gguf.dequantize_gguf_k(kind, out, floats) is True
    assert floats.any()
    bad = x.copy()
    bad[3, 5] = np.inf
    assert native_gguf.quantize_gguf_k(kind, bad, out) is False
    assert native_gguf.quantize_gguf_k(kind, x[:, ::2], out[:, ::2]) is False
    with native.use_native(False):
        assert native_gguf.quantize_gguf_k(kind, x, out) is False


@pytest.mark.parametrize("on", PATHS)
@pytest.mark.parametrize("kind", KINDS)
def test_quantize_matches_ggml(kind: str, on: bool) -> None:
    """Every case quantizes to ggml's bytes, on the numpy path and the compiled one."""
    for name, x in CASES:
        with native.use_native(on):
            ours = gguf_kquants.QUANTIZE[kind](x)
        _assert_same_bytes(ours, ggml_quantize(kind, x), f"{kind} {name}")


@pytest.mark.parametrize("on", PATHS)
@pytest.mark.parametrize("kind", KINDS)
def test_dequantize_matches_ggml_and_gguf_py(kind: str, on: bool) -> None:
    """Dequantizing ggml's blocks, and random bytes, gives ggml's and gguf-py's floats bit for bit."""
    gguf_quants = pytest.importorskip("gguf.quants", reason="gguf-py is not installed")
    rng = np.random.default_rng(5)
    size = gguf_kquants.TYPE_SIZE[kind]
    noise = rng.integers(0, 256, (8, 2 * size), dtype=np.uint8)
    noise.reshape(-1, size)[:, -2:] = (
        np.float16(rng.standard_normal(16)).view(np.uint8).reshape(-1, 2)
    )
    for name, x in [*CASES, ("noise", None)]:
        q = noise if x is None else ggml_quantize(kind, x)
        n = q.shape[1] // size * 256
        with native.use_native(on):
            ours = gguf_kquants.DEQUANTIZE[kind](q, n)
        want = ggml_dequantize(kind, q, n)
        assert np.array_equal(ours.view(np.uint32), want.view(np.uint32)), f"{kind} {name} vs ggml"
        with np.errstate(all="ignore"):
            theirs = gguf_quants.dequantize(
                q, getattr(gguf_quants.GGMLQuantizationType, kind.upper())
            )
        assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)), name


@pytest.mark.parametrize("on", PATHS)
@pytest.mark.parametrize("kind", KINDS)
def test_nonfinite_input_is_refused(kind: str, on: bool) -> None:
    """An infinity or NaN anywhere is refused, naming its row; nothing is returned."""
    x = np.ones((3, 256), np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        x[2, 77] = bad
        with (
            native.use_native(on),
            pytest.raises(RuntimeExecError, match="row 2 holds an infinity or NaN"),
        ):
            gguf_kquants.QUANTIZE[kind](x)


@pytest.mark.parametrize("kind", KINDS)
def test_bad_shapes_are_refused(kind: str) -> None:
    """Rows that are not whole super-blocks, other dtypes and mis-sized blocks get clear errors."""
    with pytest.raises(RuntimeExecError, match="multiple of 256"):
        gguf_kquants.QUANTIZE[kind](np.zeros((2, 100), np.float32))
    with pytest.raises(RuntimeExecError, match="float32 rows"):
        gguf_kquants.QUANTIZE[kind](np.zeros((2, 256), np.float64))
    with pytest.raises(RuntimeExecError, match="take"):
        gguf_kquants.DEQUANTIZE[kind](np.zeros((2, 7), np.uint8), 256)


@pytest.mark.parametrize("on", PATHS)
@pytest.mark.parametrize("kind", KINDS)
def test_empty_inputs(kind: str, on: bool) -> None:
    """No rows, or rows of no values, give empty results of the right shapes."""
    size = gguf_kquants.TYPE_SIZE[kind]
    with native.use_native(on):
        assert gguf_kquants.QUANTIZE[kind](np.zeros((0, 512), np.float32)).shape == (0, 2 * size)
        assert gguf_kquants.QUANTIZE[kind](np.zeros((3, 0), np.float32)).shape == (3, 0)
        assert gguf_kquants.DEQUANTIZE[kind](np.zeros((0, size), np.uint8), 256).shape == (0, 256)


@pytest.mark.parametrize("kind", KINDS)
def test_rows_are_independent(kind: str) -> None:
    """Quantizing rows one at a time gives the bytes of quantizing them together (chunking)."""
    x = CASES[-1][1][:6]
    whole = gguf_kquants.QUANTIZE[kind](x)
    parts = np.concatenate([gguf_kquants.QUANTIZE[kind](x[i : i + 1]) for i in range(6)])
    assert np.array_equal(whole, parts)


@pytest.mark.parametrize("kind", ["q4_k", "q6_k"])
def test_threads_quantize_in_parallel(kind: str) -> None:
    """The loops release the GIL: threads quantizing separate arrays get each array's bytes."""
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((8, 1024)).astype(np.float32) for _ in range(4)]
    serial = [gguf_kquants.QUANTIZE[kind](x) for x in arrays]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(gguf_kquants.QUANTIZE[kind], arrays))
    assert all(np.array_equal(a, b) for a, b in zip(serial, parallel, strict=True))


def test_native_off_by_environment() -> None:
    """LAZYPARAMS_NATIVE=0 leaves the K-quants to numpy (the wrapper declines), same bytes."""
    code = (
        "import numpy as np\n"
        "from lazyparams.runtime import gguf_kquants, native_gguf\n"
        "x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256)\n"
        "out = np.empty((2, 144), np.uint8)\n"
        "assert native_gguf.quantize_gguf_k('q4_k', x, out) is False\n"
        "print(gguf_kquants.QUANTIZE['q4_k'](x).tobytes().hex())\n"
    )
    env = {
        **os.environ,
        "LAZYPARAMS_NATIVE": "0",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256)
    assert run.stdout.strip() == gguf_kquants.QUANTIZE["q4_k"](x).tobytes().hex()


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_path_in_chunks(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy code taking a few super-blocks at a time (a chunk ending mid-row) gives the
    bytes and floats of the whole."""
    x = CASES[-1][1][:5]
    with native.use_native(False):
        whole = gguf_kquants.QUANTIZE[kind](x)
        back = gguf_kquants.DEQUANTIZE[kind](whole, x.shape[1])
        monkeypatch.setattr(gguf_kquants, "CHUNK_BLOCKS", 3)
        assert np.array_equal(gguf_kquants.QUANTIZE[kind](x), whole)
        assert np.array_equal(gguf_kquants.DEQUANTIZE[kind](whole, x.shape[1]), back)
