"""Every op's numpy kernel against a plain numpy oracle, written independently of the kernel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lazyparams.op  # noqa: F401  (registers the ops)
from lazyparams.errors import RuntimeExecError
from lazyparams.ir.op_registry import registered_ops
from lazyparams.runtime import KERNELS, fast, native, quant, run_kernel
from lazyparams.runtime.check import VM_OPS
from lazyparams.runtime.pool import BUFFERS

RNG = np.random.default_rng(7)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _x(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _same(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_every_registered_op_has_a_kernel() -> None:
    missing = sorted(set(registered_ops()) - set(KERNELS) - set(VM_OPS))
    assert missing == []


X = _x(2, 3, 4)
CASES: list[tuple[str, list[Any], dict[str, Any], Any]] = [
    ("permute_dims", [X], {"axes": (2, 0, 1)}, np.transpose(X, (2, 0, 1))),
    ("permute_dims", [X], {"axes": None}, X.T),
    ("reshape", [X], {"shape": (6, -1)}, X.reshape(6, 4)),
    ("expand_dims", [X], {"axis": 1}, X[:, None]),
    ("expand_dims", [X], {"axis": (0, -1)}, X[None, ..., None]),
    ("astype", [X], {"dtype": "float16"}, X.astype(np.float16)),
    ("astype", [X], {"dtype": "bfloat16"}, X.astype(BF16)),
    ("astype", [X * 10], {"dtype": "int8"}, (X * 10).astype(np.int8)),
    ("concat", [(X, X * 2)], {"axis": 1}, np.concatenate([X, X * 2], axis=1)),
    ("split", [X], {"indices_or_sections": 2, "axis": 2}, (X[..., :2], X[..., 2:])),
    (
        "split",
        [X],
        {"indices_or_sections": (1, 3), "axis": -1},
        (X[..., :1], X[..., 1:3], X[..., 3:]),
    ),
    (
        "strided_slice",
        [X],
        {"axes": (1, 2), "begin": (0, 3), "end": (3, 0), "strides": (2, -1)},
        X[:, 0:3:2, 3:0:-1],
    ),
    ("strided_slice", [X], {"axes": (0,), "begin": (1,), "end": (99,), "strides": None}, X[1:]),
    ("take", [X, np.array([2, 0, 2])], {"axis": 1}, X[:, [2, 0, 2]]),
    ("take", [X, np.array([[0, 23]])], {"axis": None}, X.reshape(-1)[[[0, 23]]]),
    ("add", [X, X[0]], {}, X + X[0]),
    ("subtract", [X, X[:, :1]], {}, X - X[:, :1]),
    (
        "multiply",
        [X.astype(np.float16), X[0, 0].astype(np.float16)],
        {},
        X.astype(np.float16) * X[0, 0].astype(np.float16),
    ),
    ("divide", [X, X + 3], {}, X / (X + 3)),
    (
        "divide",
        [np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)],
        {},
        np.array([3, -3, -3, 3], np.int32),
    ),
    ("matmul", [_x(3, 5), _x(5, 2)], {"out_dtype": None}, None),
    ("zeros", [], {"shape": (2, 0, 3), "dtype": "bfloat16"}, np.zeros((2, 0, 3), BF16)),
    ("ones", [], {"shape": (4,), "dtype": "int8"}, np.ones(4, np.int8)),
]


@pytest.mark.parametrize(("name", "ops", "attrs", "want"), CASES, ids=[c[0] for c in CASES])
def test_kernel_matches_numpy(name: str, ops: list[Any], attrs: dict[str, Any], want: Any) -> None:
    if want is None:  # matmul: the oracle needs the operands
        want = ops[0] @ ops[1]
    _same(run_kernel(name, ops, attrs), want)


def test_matmul_out_dtype_and_bfloat16() -> None:
    a, b = _x(2, 3, 4), _x(4, 5)
    _same(
        run_kernel("matmul", [a, b], {"out_dtype": "float64"}),
        a.astype(np.float64) @ b.astype(np.float64),
    )
    a16, b16 = a.astype(BF16), b.astype(BF16)
    want = (a16.astype(np.float32) @ b16.astype(np.float32)).astype(BF16)
    _same(run_kernel("matmul", [a16, b16], {"out_dtype": None}), want)


def test_results_never_share_memory_with_operands() -> None:
    """Views (reshape, split, slices, expand_dims) are materialised: one owner per value."""
    for name, ops, attrs, _ in CASES:
        result = run_kernel(name, ops, attrs)
        for leaf in result if isinstance(result, tuple) else (result,):
            for operand in ops:
                for arr in operand if isinstance(operand, tuple) else (operand,):
                    assert not np.may_share_memory(leaf, arr), name


HALF = {"axes": (0,), "begin": (1,), "end": (99,), "strides": None}


def test_a_reshape_of_a_buffer_nothing_writes_passes_it_on() -> None:
    """A view of the whole of a read-only or pool-served operand is not copied; a view of part
    of one, or of a writeable array from outside, still is."""
    frozen = _x(64, 32)
    frozen.flags.writeable = False
    with BUFFERS.watch(lambda: 1 << 30):
        pooled = BUFFERS.empty((1024, 512), np.float32)
        pooled[...] = 1
        for operand in (frozen, pooled):
            whole = run_kernel("reshape", [operand], {"shape": (operand.shape[1], -1)})
            assert np.shares_memory(whole, operand)
            np.testing.assert_array_equal(whole, operand.reshape(operand.shape[1], -1))
            half = run_kernel("strided_slice", [operand], HALF)
            assert not np.may_share_memory(half, operand)
    writeable = _x(64, 32)
    copied = run_kernel("reshape", [writeable], {"shape": (32, 64)})
    assert not np.may_share_memory(copied, writeable)


# Quantization: oracles written from the op conventions, element by element where it is clearer.


def _int8_oracle(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    moved = np.moveaxis(x.astype(np.float32), axis, 0)
    scales = []
    for row in moved:
        amax = np.float32(np.abs(row).max()) if row.size else np.float32(0)
        scales.append(np.float32(1) if amax == 0 else amax / np.float32(127))
    scale = np.array(scales, np.float32)
    q = np.clip(np.rint(moved / scale.reshape((-1,) + (1,) * (x.ndim - 1))), -127, 127)
    return np.moveaxis(q.astype(np.int8), 0, axis), scale


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_int8(axis: int) -> None:
    x = _x(4, 6, 3)
    x[:, 0] = 0
    _same(run_kernel("quantize_int8", [x], {"axis": axis}), _int8_oracle(x, axis))


def test_quantize_int8_rounds_half_to_even_and_zero_rows_scale_one() -> None:
    x = np.array([[127, 0.5, 1.5, 2.5, -0.5, -1.5], [0, 0, 0, 0, 0, 0]], np.float32)
    q, scale = run_kernel("quantize_int8", [x], {"axis": 0})
    np.testing.assert_array_equal(scale, [1, 1])
    np.testing.assert_array_equal(q[0], [127, 0, 2, 2, 0, -2])
    np.testing.assert_array_equal(q[1], 0)


def test_dequantize_int8_inverts_within_half_a_step() -> None:
    x = _x(5, 8).astype(np.float16)
    q, scale = run_kernel("quantize_int8", [x], {"axis": 1})
    back = run_kernel("dequantize_int8", [q, scale], {"axis": 1})
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, q.astype(np.float32) * scale[None, :])
    assert np.all(np.abs(back - x.astype(np.float32)) <= scale[None, :] / 2 + 1e-6)


def _int4_oracle(x: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    n, k = x.shape
    packed = np.zeros((n, k // 2), np.uint8)
    scale = np.zeros((n, k // group), np.float32)
    for r in range(n):
        for g in range(k // group):
            amax = np.float32(np.abs(x[r, g * group : (g + 1) * group]).max())
            scale[r, g] = np.float32(1) if amax == 0 else amax / np.float32(7)
        for j in range(0, k, 2):
            nibbles = []
            for c in (j, j + 1):
                q = int(np.clip(np.rint(np.float32(x[r, c]) / scale[r, c // group]), -8, 7))
                nibbles.append(q & 0xF)
            packed[r, j // 2] = nibbles[0] | (nibbles[1] << 4)
    return packed, scale


def test_quantize_int4_packs_low_nibble_first() -> None:
    x = _x(3, 16) * 4
    x[1, :8] = 0
    _same(run_kernel("quantize_int4", [x], {"group_size": 8}), _int4_oracle(x, 8))


def test_int4_round_trip_and_nibble_order() -> None:
    x = np.array([[7, -8, 1, -1]], np.float32)  # scale 8/7: q = round(x * 7 / 8)
    packed, scale = run_kernel("quantize_int4", [x], {"group_size": 4})
    np.testing.assert_array_equal(scale, [[np.float32(8) / np.float32(7)]])
    q = np.clip(np.rint(x / scale[0, 0]), -8, 7).astype(np.int8)
    assert packed[0, 0] == (int(q[0, 0]) & 0xF) | ((int(q[0, 1]) & 0xF) << 4)
    back = run_kernel("dequantize_int4", [packed, scale], {"group_size": 4})
    np.testing.assert_array_equal(back, q.astype(np.float32) * scale[0, 0])


# The chunked quantizers against the plain whole-array numpy formulas, on data with zeros,
# signed zeros, subnormals, infinities and NaNs, with chunks small enough to split rows,
# channels and groups.


def _plain_int8(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float32)
    others = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
    amax = np.max(np.abs(x), axis=others, initial=0)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = -1
    return np.clip(np.rint(x / scale.reshape(shape)), -127, 127).astype(np.int8), scale


def _plain_int4(x: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float32)
    n, k = x.shape
    groups = x.reshape(n, k // group, group)
    amax = np.max(np.abs(groups), axis=2, initial=0)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(7)).astype(np.float32)
    q = np.clip(np.rint(groups / scale[..., None]), -8, 7).astype(np.int8).reshape(n, k)
    nibbles = q.astype(np.uint8) & np.uint8(0xF)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << np.uint8(4)), scale


SPECIALS = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-44, 3e38], np.float32)


def _awkward(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Random data at a random scale, with special values, a zero slab and a subnormal one."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([1e-3, 1, 1e3]))
    flat = x.reshape(-1)
    if flat.size > 8:
        flat[rng.integers(0, flat.size, 6)] = rng.choice(SPECIALS, 6)
    if x.size:
        x[0] = 0
        x[..., -1] = 1e-44
    with np.errstate(all="ignore"):
        return x.astype(dtype)


def _plain(fn: Any, *args: Any) -> Any:
    with np.errstate(all="ignore"):
        return fn(*args)


@pytest.fixture(
    params=[(7, False), (64, False), (1 << 16, False), (1 << 16, True)],
    ids=lambda p: f"chunk{p[0]}{'-compiled' if p[1] else ''}",
)
def chunk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """The numpy loops at chunk sizes that cross many chunk edges, and the compiled loops."""
    size, compiled = request.param
    monkeypatch.setattr(fast, "CHUNK", size)
    with native.use_native(compiled):
        yield int(size)


@pytest.mark.parametrize(
    "shape", [(5,), (3, 4), (17, 33), (2, 3, 5), (4, 1, 9), (1, 300), (300, 1), (0, 4), (4, 0)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
def test_quantize_int8_chunks_match_the_plain_formula(
    chunk: int, shape: tuple[int, ...], dtype: Any
) -> None:
    for axis in range(-len(shape), len(shape)):
        x = _awkward(shape, dtype, seed=len(shape) + axis)
        _same(run_kernel("quantize_int8", [x], {"axis": axis}), _plain(_plain_int8, x, axis))


@pytest.mark.parametrize(
    ("n", "k", "group"),
    [(3, 8, 4), (5, 64, 32), (7, 6, 3), (2, 130, 2), (9, 96, 96), (3, 256, 128), (0, 4, 2)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_quantize_int4_chunks_match_the_plain_formula(
    chunk: int, n: int, k: int, group: int, dtype: Any
) -> None:
    x = _awkward((n, k), dtype, seed=n + k)
    _same(run_kernel("quantize_int4", [x], {"group_size": group}), _plain(_plain_int4, x, group))


def test_quantize_into_preallocated_outputs_and_shape_checks() -> None:
    x = _x(6, 8)
    q, scale = np.empty((6, 8), np.int8), np.empty(8, np.float32)
    quant.quantize_int8_into(x, 1, q, scale)
    _same((q, scale), _plain_int8(x, 1))
    packed, scales = np.empty((6, 4), np.uint8), np.empty((6, 2), np.float32)
    quant.quantize_int4_into(x, 4, packed, scales)
    _same((packed, scales), _plain_int4(x, 4))
    with pytest.raises(RuntimeExecError, match=r"expected outputs of shapes \(6, 8\) and \(6,\)"):
        quant.quantize_int8_into(x, 0, q, scale)
    with pytest.raises(RuntimeExecError, match=r"expected outputs of shapes \(6, 4\) and \(6, 1\)"):
        quant.quantize_int4_into(x, 8, packed, scales)


def test_dequantize_int8_along_a_later_axis() -> None:
    q = RNG.integers(-127, 128, (3, 4, 5)).astype(np.int8)
    scale = np.abs(_x(4)) + np.float32(0.1)
    got = run_kernel("dequantize_int8", [q, scale], {"axis": 1})
    _same(got, q.astype(np.float32) * scale[None, :, None])


@pytest.mark.parametrize(
    ("name", "ops", "attrs", "message"),
    [
        (
            "divide",
            [np.array([1], np.int32), np.array([0], np.int32)],
            {},
            "expected non-zero integer divisors",
        ),
        (
            "add",
            [np.zeros(2, np.float32), np.zeros(2, np.float16)],
            {},
            "expected operands of one dtype, got float32 and float16",
        ),
        (
            "take",
            [np.zeros(3, np.float32), np.array([3])],
            {"axis": 0},
            "R.take: index 3 is out of bounds",
        ),
        ("reshape", [np.zeros(6, np.float32)], {"shape": (4, -1)}, "R.reshape: cannot reshape"),
        (
            "quantize_int4",
            [np.zeros((2, 6), np.float32)],
            {"group_size": 4},
            "expected K even and divisible by group_size 4, got K = 6",
        ),
        (
            "dequantize_int8",
            [np.zeros((2, 3), np.int8), np.zeros(2, np.float32)],
            {"axis": 1},
            "expected 3 scales",
        ),
        ("no_such_op", [], {}, "R.no_such_op: expected an op with a numpy kernel"),
    ],
)
def test_kernel_errors(name: str, ops: list[Any], attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(RuntimeExecError, match=message):
        run_kernel(name, ops, attrs)
