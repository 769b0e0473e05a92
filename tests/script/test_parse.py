"""Parser features beyond the seed: symbolic dims, blocks, aliases, positional attrs, TIR forms."""

from __future__ import annotations

import textwrap

import numpy as np

from lazyparams.ir import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    ExternFunc,
    Function,
    IRModule,
    MatchCast,
    ObjectStructInfo,
    PrimStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.prim import FloatImm, IntImm, PrimVar, Select, Sub
from lazyparams.script import parse
from lazyparams.tir import Block, BufferStore, For, PrimFunc, Range
from tests.script.util import roundtrip


def main_of(body: str, signature: str = 'x: R.Tensor(("n", 4), "float32")') -> Function:
    """Parse a module whose `main` has `signature` and `body`, and return `main`."""
    text = f"@I.ir_module\nclass Module:\n    @R.function\n    def main({signature}):\n"
    text += textwrap.indent(textwrap.dedent(body), " " * 8)
    func = parse(text)["main"]
    assert isinstance(func, Function)
    return func


def test_one_symbolic_var_per_name_shared_by_signature_and_body() -> None:
    func = main_of(
        """
        n = T.int64()
        y: R.Tensor((n, 4), "float32") = R.add(x, x)
        z = R.reshape(y, (n * 4,))
        return z
        """,
        'x: R.Tensor(("n", 4), "float32"), s: R.Shape(["n", "m"])',
    )
    x, s = func.params
    n = x.struct_info.shape[0]  # type: ignore[union-attr]
    assert isinstance(n, PrimVar) and n.name == "n"
    assert s.struct_info.values[0] is n  # type: ignore[union-attr]
    y, z = (b.var for b in func.bindings())
    assert y.struct_info.shape[0] is n  # type: ignore[union-attr]
    assert z.struct_info.shape[0].a is n  # type: ignore[union-attr]


def test_dataflow_outputs_are_vars_and_blocks_alternate() -> None:
    func = main_of(
        """
        a = R.astype(x, "float16")
        with R.dataflow():
            lv = R.astype(a, "float32")
            gv = R.add(lv, x)
            R.output(gv)
        b = R.call_packed("sink", gv)
        with R.dataflow():
            R.output()
        return b
        """
    )
    kinds = [type(block) for block in func.body.blocks]
    assert kinds == [BindingBlock, DataflowBlock, BindingBlock, DataflowBlock]
    lv, gv = (b.var for b in func.body.blocks[1].bindings)
    assert type(lv) is DataflowVar and type(gv) is Var
    packed = func.body.blocks[2].bindings[0].value
    assert isinstance(packed, Call) and isinstance(packed.op, ExternFunc)
    assert packed.sinfo_args == (ObjectStructInfo(),)  # call_packed defaults to R.Object
    roundtrip(IRModule({"main": func}))


def test_positional_attrs_and_later_tvm_spellings() -> None:
    text = """
    @I.ir_module
    class Module:
        @T.prim_func
        def k(A: T.Buffer(("n", 4), "float32"), B: T.Buffer(("n", 4), "float32")):
            n = T.int64()
            for i, j in T.grid(n, 4):
                B[i, j] = A[i, j]

        @R.function
        def main(x: R.Tensor(("n", 4), "float32")) -> R.Object:
            n = T.int64()
            cls = Module
            a = R.astype(x, "float16")
            b = R.reshape(x, (2, n * 2))
            c = R.concat((x, x), 1)
            d = R.call_tir(cls.k, (x,), out_ty=R.Tensor((n, 4), "float32"))
            e: R.Any = R.call_packed("f", x, ty_args=[R.Any])
            return (a, b, c, d, e)
    """
    mod = parse(textwrap.dedent(text))
    main = mod["main"]
    assert isinstance(main, Function)
    a, b, c, d, e = (bd.value for bd in main.bindings())
    assert isinstance(a, Call) and a.attrs == {"dtype": "float16"}
    assert isinstance(b, Call) and b.attrs["shape"][0] == IntImm(2)
    assert isinstance(c, Call) and c.attrs == {"axis": 1}
    assert isinstance(d, Call) and d.sinfo_args[0].dtype == "float32"  # type: ignore[attr-defined]
    assert isinstance(e, Call) and e.sinfo_args == (ObjectStructInfo(),)
    roundtrip(mod)


def test_match_cast_and_unannotated_inference() -> None:
    func = main_of(
        """
        m = T.int64()
        o = R.call_packed("load", sinfo_args=R.Object)
        t = R.match_cast(o, R.Tensor((m, 2), "float32"))
        u: R.Tensor(ndim=2, dtype="float32") = R.match_cast(o, R.Tensor((m, 2), "float32"))
        p = R.prim_value(T.int32(7))
        return (t, u, p)
        """
    )
    _, t, u, p = func.bindings()
    assert isinstance(t, MatchCast) and t.var.struct_info == t.struct_info
    assert isinstance(u, MatchCast) and u.var.struct_info == TensorStructInfo(None, "float32", 2)
    assert p.var.struct_info == PrimStructInfo("int32", IntImm(7, "int32"))
    assert func.ret_struct_info == TupleStructInfo(tuple(b.var.struct_info for b in (t, u, p)))  # type: ignore[misc]


def test_constants_keep_dtype_and_values() -> None:
    func = main_of(
        """
        c = R.const([[1, -2], [3, 4]], "int8")
        d = R.const(0.5)
        e = R.const([float("nan"), -0.0], "bfloat16")
        return (c, d, e)
        """
    )
    c, d, e = (b.value for b in func.bindings())
    assert (
        isinstance(c, Constant) and c.data.dtype == np.int8 and c.data.tolist() == [[1, -2], [3, 4]]
    )
    assert isinstance(d, Constant) and d.data.dtype == np.float32 and d.data.shape == ()
    assert isinstance(e, Constant) and np.isnan(e.data[0].astype(np.float32))
    assert np.signbit(e.data[1].astype(np.float32))


def test_expression_statement_binds_an_unnamed_var() -> None:
    func = main_of(
        """
        R.call_packed("log", x, sinfo_args=())
        return x
        """
    )
    (binding,) = func.bindings()
    assert binding.var.name_hint == "_"


def test_top_level_functions_and_custom_aliases() -> None:
    text = """
    from lazyparams.script import relax as rx, tir as tx

    @tx.prim_func
    def fill(A: tx.Buffer((4,), "float32")):
        for i in tx.serial(1, 4):
            A[i] = tx.float32("inf")

    @rx.function
    def main(x: rx.Tensor((4,), "float32")) -> rx.Tensor((4,), "float32"):
        return x
    """
    mod = parse(textwrap.dedent(text))
    assert mod.names() == ["fill", "main"]
    fill = mod["fill"]
    assert isinstance(fill, PrimFunc) and isinstance(fill.body, For)
    assert fill.body.min == IntImm(1) and fill.body.extent == IntImm(3)
    store = fill.body.body
    assert isinstance(store, BufferStore) and store.value == FloatImm(float("inf"))


def test_tir_axes_regions_and_aliases() -> None:
    text = """
    @I.ir_module
    class Module:
        @T.prim_func
        def k(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                for k in range(4):
                    with T.block():
                        vi = T.axis.S(8, i)
                        vk = T.axis.R(4, k)
                        T.reads([A[vi, :], B[1:]])
                        T.writes(B[vi])
                        B[vi] = T.Select(vk > 0, B[vi] - A[vi, vk], -A[vi, vk])
    """
    mod = parse(textwrap.dedent(text))
    kernel = mod["k"]
    assert isinstance(kernel, PrimFunc)
    block = kernel.body.body.body  # type: ignore[attr-defined]
    assert isinstance(block, Block) and block.name == ""
    assert [iv.kind for iv in block.iter_vars] == ["S", "R"]
    assert block.reads[0].region[1] == Range(IntImm(0), IntImm(4))
    assert block.reads[1].region[0] == Range(IntImm(1), Sub(IntImm(8), IntImm(1)))
    assert isinstance(block.body, BufferStore) and isinstance(block.body.value, Select)
    roundtrip(mod)


def test_empty_module() -> None:
    mod = parse("@I.ir_module\nclass Empty:\n    pass\n")
    assert len(mod) == 0
    roundtrip(mod)
