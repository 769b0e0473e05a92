"""What the evaluator refuses, when it refuses it (at compile time), and how it says so."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.ir.prim import Add, FloatImm, IntImm, Intrinsic, PrimVar, StringImm, Sub
from lazyparams.tir import Block, For, IterVar, PrimFunc, SeqStmt, compile_prim_func, eval_prim_func
from tests.tir import builders as B


def _loop(var: PrimVar, extent: int | PrimVar, body: B.Stmt) -> For:
    return For(
        var,
        IntImm(0, "int32"),
        extent if isinstance(extent, PrimVar) else IntImm(extent, "int32"),
        body,
    )


def _refused(func: PrimFunc, *fragments: str) -> None:
    with pytest.raises(RuntimeExecError) as info:
        compile_prim_func(func, "kernel")
    message = str(info.value)
    assert message.startswith("PrimFunc kernel: ")
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_intrinsic() -> None:
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    func = PrimFunc((x, out), _loop(i, 4, B.store(out, Intrinsic("erf", (B.load(x, i),)), i)))
    _refused(func, "loop i", "got T.erf", "expected an intrinsic among abs")


def test_string_in_kernel() -> None:
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    func = PrimFunc((x, out), _loop(i, 4, B.store(out, StringImm("s"), i)))
    _refused(func, "got StringImm")


def test_non_rectangular_loop_nest() -> None:
    x, out = B.buf("x", (4, 4)), B.buf("out", (4, 4))
    i, j = PrimVar("i", "int32"), PrimVar("j", "int32")
    inner = _loop(j, i, B.store(out, B.load(x, i, j), i, j))
    _refused(PrimFunc((x, out), _loop(i, 4, inner)), "bounds of loop j", "got i")


def test_dependent_statements_inside_a_loop() -> None:
    x, tmp, out = B.buf("x", (4,)), B.buf("tmp", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    body = SeqStmt((B.store(tmp, B.load(x, i), i), B.store(out, B.load(tmp, i), i)))
    _refused(PrimFunc((x, tmp, out), _loop(i, 4, body)), "expected independent statements", "tmp")


def test_independent_statements_inside_a_loop_are_fine() -> None:
    x, a, b = B.buf("x", (4,)), B.buf("a", (4,)), B.buf("b", (4,))
    i = PrimVar("i", "int32")
    body = SeqStmt((B.store(a, B.load(x, i), i), B.store(b, B.load(x, i) * FloatImm(2.0), i)))
    data = np.arange(4, dtype=np.float32)
    outs = [np.zeros(4, np.float32), np.zeros(4, np.float32)]
    eval_prim_func(PrimFunc((x, a, b), _loop(i, 4, body)), [data, *outs])
    np.testing.assert_array_equal(outs[1], data * 2)


def test_loop_reading_what_it_writes_elsewhere() -> None:
    """A prefix sum out[i] = out[i - 1] + x[i] needs the previous iteration: refused."""
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    value = Add(B.load(out, Sub(i, IntImm(1, "int32"))), B.load(x, i))
    _refused(PrimFunc((x, out), _loop(i, 4, B.store(out, value, i))), "reads out elsewhere")


def test_reduction_body_not_an_accumulation() -> None:
    x, out = B.buf("x", (4, 4)), B.buf("out", (4,))

    def body(v: tuple[PrimVar, ...]) -> B.Stmt:
        return B.store(out, B.load(x, v[0], v[1]), v[0])

    _refused(
        PrimFunc((x, out), B.remap_nest("r", (4, 4), "SR", body)),
        "reduction block 'r'",
        "out[i] = out[i] + expr",
    )


def test_buffer_that_is_not_a_parameter() -> None:
    x, out, hidden = B.buf("x", (4,)), B.buf("out", (4,)), B.buf("hidden", (4,))
    i = PrimVar("i", "int32")
    _refused(PrimFunc((x, out), _loop(i, 4, B.store(hidden, B.load(x, i), i))), "got hidden")


def test_wrong_number_of_indices() -> None:
    x, out = B.buf("x", (4, 4)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    _refused(
        PrimFunc((x, out), _loop(i, 4, B.store(out, B.load(x, i), i))),
        "x has 2 dims, got 1 indices",
    )


def test_var_from_nowhere() -> None:
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i, stray = PrimVar("i", "int32"), PrimVar("stray", "int32")
    _refused(PrimFunc((x, out), _loop(i, 4, B.store(out, B.load(x, stray), i))), "got stray")


def test_init_may_not_use_reduce_vars() -> None:
    x, out = B.buf("x", (4, 4)), B.buf("out", (4,))

    def body(v: tuple[PrimVar, ...]) -> B.Stmt:
        return B.store(out, B.load(out, v[0]) + B.load(x, v[0], v[1]), v[0])

    def init(v: tuple[PrimVar, ...]) -> B.Stmt:
        return B.store(out, B.load(x, v[0], v[1]), v[0])

    _refused(PrimFunc((x, out), B.remap_nest("r", (4, 4), "SR", body, init)), "init", "got v1")


def test_argument_mismatches_name_the_buffer() -> None:
    func = B.transpose((2, 3), (1, 0))
    with pytest.raises(
        RuntimeExecError, match=r"buffer x: expected float32 array of shape \(2, 3\), got float16"
    ):
        eval_prim_func(func, [np.zeros((2, 3), np.float16), np.zeros((3, 2), np.float32)])
    with pytest.raises(
        RuntimeExecError, match=r"buffer out: .* got float32 array of shape \(2, 3\)"
    ):
        eval_prim_func(func, [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)])
    with pytest.raises(RuntimeExecError, match="expected 2 arrays, got 1"):
        eval_prim_func(func, [np.zeros((2, 3), np.float32)])


def test_symbolic_dims_must_agree() -> None:
    n = PrimVar("n")
    func = B.row_sum(n, n)
    with pytest.raises(
        RuntimeExecError, match=r"buffer x: expected float32 array of shape \(n, n\)"
    ):
        eval_prim_func(func, [np.zeros((2, 3), np.float32), np.zeros(2, np.float32)])


def test_read_only_output() -> None:
    func = B.transpose((2, 3), (1, 0))
    out = np.zeros((3, 2), np.float32)
    out.flags.writeable = False
    with pytest.raises(RuntimeExecError, match="expected a writeable array for out"):
        eval_prim_func(func, [np.zeros((2, 3), np.float32), out])


def test_out_of_bounds_index_at_run_time() -> None:
    x, out = B.buf("x", (4,)), B.buf("out", (4,))
    i = PrimVar("i", "int32")
    stmt = B.store(
        out, B.load(x, Add(i, IntImm(1, "int32")) * IntImm(1, "int32") % IntImm(9, "int32")), i
    )
    with pytest.raises(
        RuntimeExecError,
        match=r"buffer x: index on axis 0 out of range; expected values in \[0, 4\), got \[1, 4\]",
    ):
        eval_prim_func(
            PrimFunc((x, out), _loop(i, 4, stmt)),
            [np.zeros(4, np.float32), np.zeros(4, np.float32)],
        )


def test_block_iter_var_bindings_may_be_affine_expressions() -> None:
    """v = 2 * ax + 1 reads the odd elements through a strided view."""
    x, out = B.buf("x", (8,)), B.buf("out", (4,))
    ax, v = PrimVar("ax", "int32"), PrimVar("v", "int32")
    value = IntImm(2, "int32") * ax + IntImm(1, "int32")
    block = Block(
        "odd", (IterVar(v, IntImm(8), "S", value),), (), (), B.store(out, B.load(x, v), ax)
    )
    data = np.arange(8, dtype=np.float32)
    result = np.zeros(4, np.float32)
    eval_prim_func(PrimFunc((x, out), _loop(ax, 4, block)), [data, result])
    np.testing.assert_array_equal(result, data[1::2])
