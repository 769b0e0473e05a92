"""Vectorised PrimFunc evaluation against numpy oracles, and its refusals of the unsupported."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.prim import (
    LT,
    Add,
    Cast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Intrinsic,
    Max,
    PrimVar,
    Select,
)
from lazyparams.runtime import run_kernel
from lazyparams.tir import For, IfThenElse, PrimFunc, compile_prim_func, eval_prim_func, eval_scalar
from tests.tir import builders as B

RNG = np.random.default_rng(0)


def _run(func: PrimFunc, *inputs: np.ndarray, outputs: list[np.ndarray]) -> list[np.ndarray]:
    eval_prim_func(func, [*inputs, *outputs])
    return outputs


def test_seed_layout_transform_equals_numpy_transpose() -> None:
    w1 = RNG.standard_normal((3, 16, 3, 3)).astype(np.float32)
    (out,) = _run(B.seed_layout_transform(), w1, outputs=[np.zeros((16, 3, 3, 3), np.float32)])
    np.testing.assert_array_equal(out, np.transpose(w1, (1, 0, 2, 3)))


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    data=st.data(),
    dtype=st.sampled_from(["float32", "float16", "bfloat16", "int8"]),
)
def test_any_transpose_equals_numpy(shape: list[int], data: st.DataObject, dtype: str) -> None:
    axes = data.draw(st.permutations(range(len(shape))))
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x = (RNG.standard_normal(shape) * 10).astype(np_dtype)
    out = np.zeros([shape[a] for a in axes], np_dtype)
    eval_prim_func(B.transpose(shape, axes, dtype), [x, out])
    np.testing.assert_array_equal(out, np.transpose(x, axes))


def test_elementwise_with_broadcast_row() -> None:
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    b = RNG.standard_normal((1, 7)).astype(np.float32)
    (out,) = _run(B.add_row(5, 7), a, b, outputs=[np.zeros((5, 7), np.float32)])
    np.testing.assert_array_equal(out, a + b * np.float32(2))


def test_sum_reduction_with_init() -> None:
    x = RNG.standard_normal((6, 33)).astype(np.float32)
    garbage = np.full(6, 99.0, np.float32)  # T.init must reset whatever the output held
    (out,) = _run(B.row_sum(6, 33), x, outputs=[garbage])
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-6)


def test_sum_reduction_over_symbolic_dims() -> None:
    n, k = PrimVar("n"), PrimVar("k")
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    (out,) = _run(B.row_sum(n, k), x, outputs=[np.zeros(4, np.float32)])
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-6)


@pytest.mark.parametrize(
    ("src", "dst"), [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32")]
)
def test_cast(src: str, dst: str) -> None:
    to_np = {"bfloat16": np.dtype(ml_dtypes.bfloat16)}
    x = RNG.standard_normal((4, 5)).astype(to_np.get(src, np.dtype(src)))
    out = np.zeros((4, 5), to_np.get(dst, np.dtype(dst)))
    eval_prim_func(B.cast((4, 5), src, dst), [x, out])
    np.testing.assert_array_equal(out, x.astype(out.dtype))


def test_cast_float_to_int_truncates_toward_zero() -> None:
    x = np.array([-2.7, -0.5, 0.5, 2.7], np.float32)
    out = np.zeros(4, np.int32)
    eval_prim_func(B.cast((4,), "float32", "int32"), [x, out])
    np.testing.assert_array_equal(out, [-2, 0, 0, 2])


def _quantize_int8_oracle(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    amax = np.abs(x).max(axis=1)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
    q = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def test_int8_quantization_kernel() -> None:
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    x[3] = 0  # an all-zero row takes scale 1
    x[5] = 0
    x[5, :4] = [127, 0.5, 1.5, -2.5]  # scale 1: these land on .5 and round half to even
    q, scale = _run(
        B.quantize_int8_rows(8, 16),
        x,
        outputs=[np.zeros((8, 16), np.int8), np.zeros(8, np.float32)],
    )
    want_q, want_scale = _quantize_int8_oracle(x)
    np.testing.assert_array_equal(scale, want_scale)
    np.testing.assert_array_equal(q, want_q)
    op_q, op_scale = run_kernel("quantize_int8", [x], {"axis": 0})  # the op agrees, bit for bit
    np.testing.assert_array_equal(op_q, q)
    np.testing.assert_array_equal(op_scale, scale)


def test_round_is_half_to_even() -> None:
    x = B.buf("x", (6,))
    out = B.buf("out", (6,))
    i = PrimVar("i", "int32")
    body = For(
        i,
        IntImm(0, "int32"),
        IntImm(6, "int32"),
        B.store(out, Intrinsic("round", (B.load(x, i),)), i),
    )
    data = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4], np.float32)
    result = np.zeros(6, np.float32)
    eval_prim_func(PrimFunc((x, out), body), [data, result])
    np.testing.assert_array_equal(result, [0, 2, 2, -0.0, -2, 2])


def test_non_affine_indices_gather() -> None:
    """out[i] = x[i // 4, i % 4]: a flatten, through fancy indexing."""
    x, out = B.buf("x", (3, 4)), B.buf("out", (12,))
    i = PrimVar("i", "int32")
    four = IntImm(4, "int32")
    value = B.load(x, FloorDiv(i, four), FloorMod(i, four))
    func = PrimFunc(
        (x, out), For(i, IntImm(0, "int32"), IntImm(12, "int32"), B.store(out, value, i))
    )
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    (result,) = _run(func, data, outputs=[np.zeros(12, np.float32)])
    np.testing.assert_array_equal(result, data.reshape(-1))


def test_scatter_through_non_affine_store() -> None:
    """out[i % 3, i // 3] = x[i]: an unflatten with a transposed layout, stored by scatter."""
    x, out = B.buf("x", (12,)), B.buf("out", (3, 4))
    i = PrimVar("i", "int32")
    three = IntImm(3, "int32")
    stmt = B.store(out, B.load(x, i), FloorMod(i, three), FloorDiv(i, three))
    func = PrimFunc((x, out), For(i, IntImm(0, "int32"), IntImm(12, "int32"), stmt))
    data = np.arange(12, dtype=np.float32)
    (result,) = _run(func, data, outputs=[np.zeros((3, 4), np.float32)])
    np.testing.assert_array_equal(result, data.reshape(4, 3).T)


def test_padding_select_guards_out_of_bounds_loads() -> None:
    """out[i] = x[i] if i < 5 else 0 over 8 elements: x[5..7] is never really read."""
    x, out = B.buf("x", (5,)), B.buf("out", (8,))
    i = PrimVar("i", "int32")
    value = Select(LT(i, IntImm(5, "int32")), B.load(x, i), FloatImm(0.0))
    func = PrimFunc(
        (x, out), For(i, IntImm(0, "int32"), IntImm(8, "int32"), B.store(out, value, i))
    )
    data = np.arange(1, 6, dtype=np.float32)
    (result,) = _run(func, data, outputs=[np.full(8, 7, np.float32)])
    np.testing.assert_array_equal(result, [1, 2, 3, 4, 5, 0, 0, 0])


def test_if_then_else_statement_masks_stores() -> None:
    x, out = B.buf("x", (6,)), B.buf("out", (6,))
    i = PrimVar("i", "int32")
    cond = LT(i, IntImm(2, "int32"))
    stmt = IfThenElse(cond, B.store(out, B.load(x, i), i), B.store(out, FloatImm(-1.0), i))
    func = PrimFunc((x, out), For(i, IntImm(0, "int32"), IntImm(6, "int32"), stmt))
    data = np.arange(6, dtype=np.float32)
    (result,) = _run(func, data, outputs=[np.zeros(6, np.float32)])
    np.testing.assert_array_equal(result, [0, 1, -1, -1, -1, -1])


def test_max_reduction_into_strided_output_and_scatter_sum() -> None:
    """A max over columns, and a sum whose output index i // 2 is not affine (ufunc.at)."""
    x, out = B.buf("x", (4, 6)), B.buf("out", (2,))

    def body(v: tuple[PrimVar, ...]) -> B.Stmt:
        i, k = v
        return B.store(
            out,
            Add(B.load(out, FloorDiv(i, IntImm(2, "int32"))), B.load(x, i, k)),
            FloorDiv(i, IntImm(2, "int32")),
        )

    func = PrimFunc((x, out), B.remap_nest("pair_sum", (4, 6), "RR", body))
    data = RNG.standard_normal((4, 6)).astype(np.float32)
    (result,) = _run(func, data, outputs=[np.zeros(2, np.float32)])
    np.testing.assert_allclose(result, data.reshape(2, 12).sum(axis=1), rtol=1e-5)

    m = B.buf("m", (4,))

    def mx(v: tuple[PrimVar, ...]) -> B.Stmt:
        return B.store(m, Max(B.load(m, v[0]), B.load(x, v[0], v[1])), v[0])

    def init(v: tuple[PrimVar, ...]) -> B.Stmt:
        return B.store(m, FloatImm(-1e30), v[0])

    func = PrimFunc((x, m), B.remap_nest("max", (4, 6), "SR", mx, init))
    (result,) = _run(func, data, outputs=[np.zeros(4, np.float32)])
    np.testing.assert_array_equal(result, data.max(axis=1))


def test_last_write_wins_when_iterations_share_an_element() -> None:
    """out[0] = x[j] for every j: a sequential loop leaves the last x."""
    x, out = B.buf("x", (5,)), B.buf("out", (1,))
    j = PrimVar("j", "int32")
    func = PrimFunc(
        (x, out), For(j, IntImm(0, "int32"), IntImm(5, "int32"), B.store(out, B.load(x, j), 0))
    )
    data = np.arange(5, dtype=np.float32)
    (result,) = _run(func, data, outputs=[np.zeros(1, np.float32)])
    assert result[0] == 4


def test_eval_scalar() -> None:
    n = PrimVar("n")
    assert eval_scalar(n * 4 + 1, {n: 3}) == 13
    assert eval_scalar(FloorDiv(IntImm(-7), IntImm(2)), {}) == -4
    assert eval_scalar(Cast("int32", FloatImm(-2.5)), {}) == -2
    with pytest.raises(RuntimeExecError, match="var n has no value"):
        eval_scalar(n + 1, {})


def test_large_kernel_is_vectorised() -> None:
    """A million-element gather and a transpose: far too fast for a loop per element."""
    func = B.transpose((1024, 1024), (1, 0))
    x = RNG.standard_normal((1024, 1024)).astype(np.float32)
    out = np.zeros((1024, 1024), np.float32)
    kernel = compile_prim_func(func)
    start = time.perf_counter()
    kernel([x, out])
    assert time.perf_counter() - start < 2.0
    np.testing.assert_array_equal(out, x.T)
