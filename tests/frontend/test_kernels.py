"""User kernels in a trace: TIR PrimFuncs through call_tir, Python functions over numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import TraceError
from lazyparams.frontend import ops, trace
from lazyparams.ir import Call, ExternFunc, Function, TensorStructInfo, TupleStructInfo
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar, as_prim
from lazyparams.script import tir as T
from lazyparams.tir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
)

ARRAYS = {
    "w": (np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5) / 3,
    "v": np.linspace(-1, 1, 6, dtype=np.float32),
}


# TIR kernels, written with the TIR nodes -----------------------------------------------------


def _spatial_block(name: str, dims: tuple[PrimExpr, ...], body: Any) -> tuple[Any, list[PrimVar]]:
    """A loop nest over `dims` with one spatial block; `body(block vars)` gives its stores."""
    loops = [PrimVar(f"i{k}") for k in range(len(dims))]
    block_vars = [PrimVar(f"v{k}") for k in range(len(dims))]
    iters = tuple(
        IterVar(bv, d, "S", lv) for bv, d, lv in zip(block_vars, dims, loops, strict=True)
    )
    stores, reads, writes = body(block_vars)
    stmt: Any = Block(name, iters, reads, writes, stores)
    for loop, dim in reversed(list(zip(loops, dims, strict=True))):
        stmt = For(loop, as_prim(0), dim, stmt)
    return stmt, block_vars


def _point(buf: Buffer, idx: list[PrimVar]) -> BufferRegion:
    return BufferRegion(buf, tuple(Range(i, as_prim(1)) for i in idx))


def transpose_kernel(n: PrimExpr, m: PrimExpr) -> PrimFunc:
    a, b = Buffer("A", (n, m), "float32"), Buffer("B", (m, n), "float32")

    def body(v: list[PrimVar]) -> Any:
        i, j = v
        store = BufferStore(b, BufferLoad(a, (j, i)), (i, j))
        return store, (_point(a, [j, i]),), (_point(b, [i, j]),)

    stmt, _ = _spatial_block("T", (m, n), body)
    return PrimFunc((a, b), stmt, {"global_symbol": "transpose"})


def scale_and_shift_kernel() -> PrimFunc:
    """Two outputs: y = x * s (s broadcast along rows) and z = x + s."""
    x = Buffer("x", (IntImm(4), IntImm(6)), "float32")
    s = Buffer("s", (IntImm(6),), "float32")
    y = Buffer("y", (IntImm(4), IntImm(6)), "float32")
    z = Buffer("z", (IntImm(4), IntImm(6)), "float32")

    def body(v: list[PrimVar]) -> Any:
        i, j = v
        xij, sj = BufferLoad(x, (i, j)), BufferLoad(s, (j,))
        stores = SeqStmt((BufferStore(y, xij * sj, (i, j)), BufferStore(z, xij + sj, (i, j))))
        return stores, (_point(x, [i, j]), _point(s, [j])), (_point(y, [i, j]), _point(z, [i, j]))

    stmt, _ = _spatial_block("scale", (IntImm(4), IntImm(6)), body)
    return PrimFunc((x, s, y, z), stmt)


def test_a_static_tir_kernel_is_added_to_the_module_and_called(check: Any) -> None:
    kernel = transpose_kernel(IntImm(4), IntImm(6))

    def fn(p: Any) -> dict[str, Any]:
        return {"t": ops.call_tir(kernel, p["w"]), "again": ops.call_tir(kernel, [p["w"]]) * 2.0}

    mod = check(fn, ARRAYS, lambda n: {"t": n["w"].T, "again": n["w"].T * 2.0})
    assert mod.names() == ["transform_params", "transpose"]
    assert mod["transpose"] is kernel


def test_symbolic_kernel_dims_are_resolved_from_the_arguments(check: Any) -> None:
    kernel = transpose_kernel(PrimVar("n"), PrimVar("m"))
    mod = check(
        lambda p: {"t": ops.call_tir(kernel, p["w"]), "u": ops.call_tir(kernel, p["w"].T)},
        ARRAYS,
        lambda n: {"t": n["w"].T, "u": n["w"]},
    )
    out = mod["transform_params"].ret_struct_info
    assert out == TupleStructInfo(
        (TensorStructInfo((6, 4), "float32"), TensorStructInfo((4, 6), "float32"))
    )


def test_a_kernel_with_two_outputs_returns_a_tuple(check: Any) -> None:
    kernel = scale_and_shift_kernel()

    def fn(p: Any) -> dict[str, Any]:
        y, z = ops.call_tir(kernel, (p["w"], p["v"]), name="scale")
        return {"y": y, "z": z}

    mod = check(fn, ARRAYS, lambda n: {"y": n["w"] * n["v"], "z": n["w"] + n["v"]})
    assert mod.names() == ["transform_params", "scale"]


def test_out_shape_is_needed_only_where_the_arguments_do_not_fix_it(check: Any) -> None:
    n, m, k = PrimVar("n"), PrimVar("m"), PrimVar("k")
    a, b = Buffer("A", (n, m), "float32"), Buffer("B", (m, k), "float32")

    def body(v: list[PrimVar]) -> Any:
        i, j = v
        return (
            BufferStore(b, BufferLoad(a, (j, i)), (i, j)),
            (_point(a, [j, i]),),
            (_point(b, [i, j]),),
        )

    kernel = PrimFunc((a, b), _spatial_block("T", (m, k), body)[0])
    with pytest.raises(TraceError, match=r"expected out_shape .* got none for B"):
        trace(lambda p: {"t": ops.call_tir(kernel, p["w"])}, {"w": ((4, 6), "float32")})
    check(
        lambda p: {"t": ops.call_tir(kernel, p["w"], out_shape=(6, 4), out_dtype="float32")},
        ARRAYS,
        lambda n: {"t": n["w"].T},
    )


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (
            lambda k, w: ops.call_tir(k, w.astype("float16")),
            r"argument 0 \(A\): expected \(4, 6\) float32, got \(4, 6\) float16",
        ),
        (
            lambda k, w: ops.call_tir(k, w.T),
            r"argument 0 \(A\): expected \(4, 6\) float32, got \(6, 4\)",
        ),
        (lambda k, w: ops.call_tir(k, (w, w)), "expected fewer than 2 arguments"),
        (
            lambda k, w: ops.call_tir(k, w, out_shape=(4, 6)),
            r"output B: expected \(6, 4\) float32, got \(4, 6\)",
        ),
        (lambda k, w: ops.call_tir("transpose", w), "expected a TIR PrimFunc, got str"),
    ],
)
def test_bad_tir_calls_are_refused_at_the_users_line(call: Any, pattern: str) -> None:
    kernel = transpose_kernel(IntImm(4), IntImm(6))
    with pytest.raises(TraceError, match=pattern) as info:
        trace(lambda p: {"t": call(kernel, p["w"])}, {"w": ((4, 6), "float32")})
    assert str(info.value).startswith(f"{__file__}:")


def test_kernel_names_stay_unique() -> None:
    one, two = transpose_kernel(IntImm(4), IntImm(6)), transpose_kernel(IntImm(6), IntImm(4))

    def fn(p: Any) -> dict[str, Any]:
        return {"a": ops.call_tir(one, p["w"]), "b": ops.call_tir(two, p["w"].T)}

    mod = trace(fn, {"w": ((4, 6), "float32")})
    assert mod.names() == ["transform_params", "transpose", "transpose_1"]


@T.prim_func
def scale_rows(
    A: T.Buffer((4, 6), "float32"), S: T.Buffer((4,), "float32"), B: T.Buffer((4, 6), "float32")
):
    for i, j in T.grid(4, 6):
        with T.block("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj], S[vi])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * S[vi]


def test_a_kernel_written_in_the_script_syntax(check: Any) -> None:
    def fn(p: Any) -> dict[str, Any]:
        scale = p["w"][:, 0]
        return {"y": ops.call_tir(scale_rows, (p["w"], scale), name="scale_rows")}

    mod = check(fn, ARRAYS, lambda n: {"y": n["w"] * n["w"][:, :1]})
    assert mod.names() == ["transform_params", "scale_rows"]


# numpy kernels ------------------------------------------------------------------------------


def row_cumsum(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x, axis=1, dtype=np.float32)


def test_a_numpy_kernel_is_an_extern_call_recorded_in_the_module(check: Any) -> None:
    cumsum = ops.numpy_kernel(row_cumsum, (4, 6), np.float32)
    mod = check(
        lambda p: {"c": cumsum(p["w"]), "d": cumsum(p["w"] * 2.0)},
        ARRAYS,
        lambda n: {"c": row_cumsum(n["w"]), "d": row_cumsum(n["w"] * 2.0)},
    )
    func = mod["transform_params"]
    assert isinstance(func, Function) and not func.is_pure
    externs = [
        b.value.op
        for b in func.bindings()
        if isinstance(b.value, Call) and isinstance(b.value.op, ExternFunc)
    ]
    assert [e.global_symbol for e in externs] == ["numpy_kernel.row_cumsum"] * 2
    assert mod.attrs["numpy_kernels"] == {"numpy_kernel.row_cumsum": row_cumsum}


def test_a_numpy_kernel_with_several_outputs_and_constant_arguments(check: Any) -> None:
    def top(x: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        y = x + bias
        return y.max(axis=1), y.argmax(axis=1).astype(np.int64)

    kernel = ops.numpy_kernel(top, [(4,), (4,)], ["float32", "int64"])
    bias = np.full(6, 0.25, dtype=np.float32)

    def fn(p: Any) -> dict[str, Any]:
        best, where = kernel(p["w"], bias)
        return {"best": best, "where": where}

    check(fn, ARRAYS, lambda n: dict(zip(["best", "where"], top(n["w"], bias), strict=True)))


def test_numpy_kernels_of_one_name_get_distinct_externs() -> None:
    first = ops.numpy_kernel(lambda x: x, (4, 6), "float32")
    second = ops.numpy_kernel(lambda x: x * 2, (4, 6), "float32")
    mod = trace(
        lambda p: {"a": first(p["w"]), "b": second(p["w"]), "c": first(p["w"])},
        {"w": ((4, 6), "float32")},
    )
    assert list(mod.attrs["numpy_kernels"]) == ["numpy_kernel.lambda", "numpy_kernel.lambda_1"]


def test_a_module_without_numpy_kernels_has_no_such_attr() -> None:
    mod = trace(lambda p: {"a": p["w"].T}, {"w": ((4, 6), "float32")})
    assert "numpy_kernels" not in mod.attrs


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((row_cumsum, "4x6", "float32"), "expected out_shape as a shape or a list of shapes"),
        (
            (row_cumsum, [(4,), (4,)], ["float32"]),
            "expected 2 output dtypes, one per out_shape, got 1",
        ),
        ((row_cumsum, (4, -6), "float32"), "expected non-negative output dims"),
        ((row_cumsum, (4, 6), "float31"), "expected a dtype"),
        (("row_cumsum", (4, 6), "float32"), "expected a function, got str"),
    ],
)
def test_bad_numpy_kernel_declarations(args: Any, pattern: str) -> None:
    with pytest.raises(TraceError, match=pattern):
        ops.numpy_kernel(*args)
