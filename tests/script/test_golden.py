"""Golden tests: the exact printed text of every node kind, Relax and TIR, and its round trip."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from lazyparams import op
from lazyparams.ir import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    ExternFunc,
    FuncStructInfo,
    Function,
    GlobalVar,
    IRModule,
    MatchCast,
    ObjectStructInfo,
    PrimStructInfo,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    StringImm,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    struct_info_of,
)
from lazyparams.ir.prim import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Intrinsic,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimVar,
    Select,
    Sub,
)
from lazyparams.tir import (
    Block,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
)
from tests.script.util import golden

F32 = "float32"


def tensor(*shape: object, dtype: str = F32) -> TensorStructInfo:
    return TensorStructInfo(tuple(shape), dtype)  # type: ignore[arg-type]


def function(params: list[Var], bindings: list[VarBinding], result: Var, ret: object) -> Function:
    """A function of one plain block."""
    return Function(tuple(params), SeqExpr((BindingBlock(tuple(bindings)),), result), ret)  # type: ignore[arg-type]


def bind(var: Var, value: object) -> VarBinding:
    return VarBinding(var, value)  # type: ignore[arg-type]


def struct_info_module() -> IRModule:
    """Params of every struct info kind; the body returns them as a tuple."""
    n = PrimVar("n")
    params = [
        Var("a", tensor(n, 4)),
        Var("b", TensorStructInfo(None, "float16", 2)),
        Var("c", TensorStructInfo(None, "")),
        Var("d", TupleStructInfo((tensor(2), ObjectStructInfo()))),
        Var("e", PrimStructInfo("int64", n)),
        Var("f", ShapeStructInfo((n, IntImm(2)))),
        Var("g", ShapeStructInfo(None, 3)),
        Var(
            "h",
            FuncStructInfo(
                (PrimStructInfo("int64"), ObjectStructInfo()), ObjectStructInfo(), False
            ),
        ),
    ]
    body = Tuple(tuple(params))
    ret = TupleStructInfo(tuple(p.struct_info for p in params))  # type: ignore[misc]
    func = Function(tuple(params), SeqExpr((), body), ret)
    return IRModule({"main": func})


def test_struct_info_of_every_kind() -> None:
    golden(
        struct_info_module(),
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @R.function
            def main(
                a: R.Tensor(("n", 4), dtype="float32"),
                b: R.Tensor(dtype="float16", ndim=2),
                c: R.Tensor,
                d: R.Tuple(R.Tensor((2,), dtype="float32"), R.Object),
                e: R.Prim("int64", value="n"),
                f: R.Shape(["n", 2]),
                g: R.Shape(ndim=3),
                h: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            ) -> R.Tuple(
                R.Tensor(("n", 4), dtype="float32"),
                R.Tensor(dtype="float16", ndim=2),
                R.Tensor,
                R.Tuple(R.Tensor((2,), dtype="float32"), R.Object),
                R.Prim("int64", value="n"),
                R.Shape(["n", 2]),
                R.Shape(ndim=3),
                R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            ):
                n = T.int64()
                return (a, b, c, d, e, f, g, h)
        """,
    )


def leaves_module() -> IRModule:
    """Constants of several dtypes, prim values, strings, shapes, tuples and extern names."""
    x = Var("x", tensor(2, 2))
    n = PrimVar("n")
    values = [
        Constant(np.array([[1.5, -0.0], [float("inf"), float("nan")]], np.float32)),
        Constant(np.array(7, np.int32)),
        Constant(np.array([True, False])),
        Constant(np.array([0.1, 3.0], ml_dtypes.bfloat16)),
        Constant(np.array([[]], np.float16)),
        PrimValue(IntImm(3)),
        PrimValue(Add(n, IntImm(1))),
        PrimValue(FloatImm(0.25, "float16")),
        StringImm('say "hi"\n'),
        ShapeExpr((n, IntImm(4))),
        Tuple(()),
        Tuple((x,)),
        TupleGetItem(Tuple((x, x)), 1),
        ExternFunc("my_kernel"),
    ]
    bindings = [VarBinding(Var("v", struct_info_of(v)), v) for v in values]
    params = [x, Var("s", ShapeStructInfo((n, IntImm(4))))]
    return IRModule({"main": function(params, bindings, x, x.struct_info)})


def test_leaf_expressions() -> None:
    golden(
        leaves_module(),
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @R.function
            def main(
                x: R.Tensor((2, 2), dtype="float32"), s: R.Shape(["n", 4])
            ) -> R.Tensor((2, 2), dtype="float32"):
                n = T.int64()
                v: R.Tensor((2, 2), dtype="float32") = R.const([[1.5, -0.0], [float("inf"), float("nan")]], "float32")
                v_1: R.Tensor((), dtype="int32") = R.const(7, "int32")
                v_2: R.Tensor((2,), dtype="bool") = R.const([True, False], "bool")
                v_3: R.Tensor((2,), dtype="bfloat16") = R.const([0.10009765625, 3.0], "bfloat16")
                v_4: R.Tensor((1, 0), dtype="float16") = R.const([[]], "float16")
                v_5: R.Prim("int64", value=3) = R.prim_value(3)
                v_6: R.Prim("int64", value=n + 1) = R.prim_value(n + 1)
                v_7: R.Prim("float16", value=T.float16(0.25)) = R.prim_value(T.float16(0.25))
                v_8: R.Object = R.str("say \\"hi\\"\\n")
                v_9: R.Shape([n, 4]) = R.shape([n, 4])
                v_10: R.Tuple = ()
                v_11: R.Tuple(R.Tensor((2, 2), dtype="float32")) = (x,)
                v_12: R.Tensor((2, 2), dtype="float32") = (x, x)[1]
                v_13: R.Object = R.ExternFunc("my_kernel")
                return x
        """,
    )


def calls_module() -> IRModule:
    """Op calls with attrs, extern calls, call_tir, calls of functions and vars, blocks, names."""
    n = PrimVar("n")
    x = Var("x", tensor(n, 4))
    f = Var("lambda", FuncStructInfo((tensor(n, 4),), ObjectStructInfo(), purity=False))
    ops = [
        op.permute_dims(x, [1, 0]),
        op.reshape(x, [n * 4]),
        op.astype(x, "float16"),
        op.concat(Tuple((x, x)), axis=1),
        op.split(x, (1, 3), axis=1),
        op.strided_slice(x, axes=[1], begin=[0], end=[2]),
        op.take(x, Constant(np.array([0, 1], np.int64)), axis=0),
        op.zeros([2, n], "int8"),
        op.matmul(x, op.permute_dims(x), out_dtype="float32"),
    ]
    flow = [VarBinding(DataflowVar("lv", struct_info_of(o)), o) for o in ops]
    flow.append(VarBinding(Var("x.y", flow[0].var.struct_info), flow[0].var))
    gv = Var("gv", tensor(n, 4))
    kernel, helper = GlobalVar("kernel"), GlobalVar("helper")
    two = (tensor(n, 4), tensor(4, n))
    plain = [
        bind(Var("cls", ObjectStructInfo()), Call(f, (x,))),
        bind(Var("p", ObjectStructInfo()), Call(ExternFunc("get"), (PrimValue(IntImm(0)),))),
        bind(Var("q", TupleStructInfo(two)), Call(ExternFunc("two"), (x,), {}, two)),
        bind(Var("r", TupleStructInfo(two)), op.call_tir(kernel, (x,), list(two))),
        bind(Var("s", ObjectStructInfo()), Call(helper, (x,))),
        MatchCast(gv, flow[-1].var, tensor(n, 4)),
        bind(Var("k", TupleStructInfo(())), op.kill_object(x)),
    ]
    blocks = (DataflowBlock(tuple(flow)), BindingBlock(tuple(plain)))
    main = Function((x, f), SeqExpr(blocks, gv), tensor(n, 4), False, {"num_input": 1})
    y = Var("y", tensor(PrimVar("m"), 4))
    helper_func = Function((y,), SeqExpr((), y), y.struct_info)  # type: ignore[arg-type]
    return IRModule({"main": main, helper: helper_func, kernel: copy_kernel()})


def copy_kernel() -> PrimFunc:
    """`B = A` and `C = A.T` over a symbolic first dim, as one block with remapped axes."""
    n = PrimVar("n")
    a, b, c = Buffer("A", (n, IntImm(4))), Buffer("B", (n, IntImm(4))), Buffer("C", (IntImm(4), n))
    i, j = PrimVar("i"), PrimVar("j")
    vi, vj = PrimVar("vi"), PrimVar("vj")
    load = BufferLoad(a, (vi, vj))
    body = SeqStmt((BufferStore(b, load, (vi, vj)), BufferStore(c, load, (vj, vi))))
    block = Block(
        "copy",
        (IterVar(vi, n, "S", i), IterVar(vj, IntImm(4), "S", j)),
        (BufferRegion(a, (Range(vi, IntImm(1)), Range(vj, IntImm(1)))),),
        (
            BufferRegion(b, (Range(vi, IntImm(1)), Range(vj, IntImm(1)))),
            BufferRegion(c, (Range(IntImm(0), IntImm(4)), Range(IntImm(0), n))),
        ),
        body,
    )
    loops = For(i, IntImm(0), n, For(j, IntImm(0), IntImm(4), block))
    return PrimFunc((a, b, c), loops)


def kernels_module() -> IRModule:
    """Loops of every kind, explicit axes with init, ifs, and every scalar operator."""
    a, s = Buffer("A", (IntImm(8), IntImm(4))), Buffer("S", (IntImm(8),))
    z = Buffer("Z", (), "int32")
    i, k, vi, vk = PrimVar("i"), PrimVar("k"), PrimVar("vi"), PrimVar("vk")
    load = BufferLoad(a, (vi, vk))
    reduce = Block(
        "sum",
        (IterVar(vi, IntImm(8), "S", i), IterVar(vk, IntImm(4), "R", Mul(k, IntImm(1)))),
        (BufferRegion(a, (Range(vi, IntImm(1)), Range(IntImm(0), IntImm(4)))),),
        (BufferRegion(s, (Range(vi, IntImm(1)),)),),
        BufferStore(s, Add(BufferLoad(s, (vi,)), Max(load, FloatImm(-0.5))), (vi,)),
        BufferStore(s, FloatImm(0.0), (vi,)),
    )
    sum_loop = For(i, IntImm(0), IntImm(8), For(k, IntImm(0), IntImm(4), reduce, "unrolled"))
    j, j2, j3 = PrimVar("j"), PrimVar("j"), PrimVar("j")
    x = BufferLoad(s, (j,))
    branches = IfThenElse(
        And(LT(j, IntImm(2)), Not(EQ(FloorMod(j, IntImm(2)), IntImm(1)))),
        BufferStore(
            s, Select(GE(x, FloatImm(0.0)), Intrinsic("exp", (x,)), Sub(FloatImm(0.0), x)), (j,)
        ),
        IfThenElse(
            Or(NE(j, IntImm(3)), GT(FloorDiv(j, IntImm(2)), IntImm(1))),
            BufferStore(
                s, Div(Mul(x, Add(x, FloatImm(1.0))), Cast("float32", Min(j, IntImm(5)))), (j,)
            ),
            BufferStore(s, Cast("float32", Cast("float16", x)), (j,)),
        ),
    )
    loops = SeqStmt(
        (
            sum_loop,
            For(j, IntImm(2), IntImm(6), branches, "parallel"),
            For(
                j2,
                IntImm(0),
                IntImm(8),
                BufferStore(s, Intrinsic("sqrt", (BufferLoad(s, (j2,)),)), (j2,)),
                "vectorized",
            ),
            For(
                j3,
                IntImm(0),
                IntImm(8),
                IfThenElse(LE(j3, IntImm(0)), BufferStore(z, IntImm(-3, "int32"), ())),
            ),
        )
    )
    return IRModule({"kernels": PrimFunc((a, s, z), loops, {"tir.noalias": True})})


def test_kernels_with_every_statement_and_operator() -> None:
    golden(
        kernels_module(),
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @T.prim_func
            def kernels(
                A: T.Buffer((8, 4), "float32"), S: T.Buffer((8,), "float32"), Z: T.Buffer((), "int32")
            ):
                T.func_attr({"tir.noalias": True})
                for i in range(8):
                    for k in T.unroll(4):
                        with T.block("sum"):
                            vi = T.axis.spatial(8, i)
                            vk = T.axis.reduce(4, k * 1)
                            T.reads(A[vi, 0:4])
                            T.writes(S[vi])
                            with T.init():
                                S[vi] = 0.0
                            S[vi] = S[vi] + T.max(A[vi, vk], -0.5)
                for j in T.parallel(2, 8):
                    if j < 2 and not j % 2 == 1:
                        S[j] = T.if_then_else(S[j] >= 0.0, T.exp(S[j]), 0.0 - S[j])
                    elif j != 3 or j // 2 > 1:
                        S[j] = S[j] * (S[j] + 1.0) / T.Cast("float32", T.min(j, 5))
                    else:
                        S[j] = T.Cast("float32", T.Cast("float16", S[j]))
                for j in T.vectorized(8):
                    S[j] = T.sqrt(S[j])
                for j in range(8):
                    if j <= 0:
                        Z[()] = T.int32(-3)
        """,
    )


def test_calls_blocks_and_names() -> None:
    """Two vars named lv become lv, lv_1; reserved or invalid names are changed."""
    golden(
        calls_module(),
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @R.function(pure=False)
            def main(
                x: R.Tensor(("n", 4), dtype="float32"),
                lambda_: R.Callable([R.Tensor(("n", 4), dtype="float32")], R.Object, purity=False),
            ) -> R.Tensor(("n", 4), dtype="float32"):
                n = T.int64()
                R.func_attr({"num_input": 1})
                cls = Module
                with R.dataflow():
                    lv: R.Tensor((4, n), dtype="float32") = R.permute_dims(x, axes=[1, 0])
                    lv_1: R.Tensor((n * 4,), dtype="float32") = R.reshape(x, shape=[n * 4])
                    lv_2: R.Tensor((n, 4), dtype="float16") = R.astype(x, dtype="float16")
                    lv_3: R.Tensor((n, 8), dtype="float32") = R.concat((x, x), axis=1)
                    lv_4: R.Tuple(
                        R.Tensor((n, 1), dtype="float32"),
                        R.Tensor((n, 2), dtype="float32"),
                        R.Tensor((n, 1), dtype="float32"),
                    ) = R.split(x, indices_or_sections=[1, 3], axis=1)
                    lv_5: R.Tensor((n, 2), dtype="float32") = R.strided_slice(
                        x, axes=[1], begin=[0], end=[2], strides=None
                    )
                    lv_6: R.Tensor((2, 4), dtype="float32") = R.take(x, R.const([0, 1], "int64"), axis=0)
                    lv_7: R.Tensor((2, n), dtype="int8") = R.zeros(shape=[2, n], dtype="int8")
                    lv_8: R.Tensor((n, n), dtype="float32") = R.matmul(
                        x, R.permute_dims(x, axes=None), out_dtype="float32"
                    )
                    x_y: R.Tensor((4, n), dtype="float32") = lv
                    R.output(x_y)
                cls_1: R.Object = lambda_(x)
                p: R.Object = R.call_packed("get", R.prim_value(0), sinfo_args=())
                q: R.Tuple(
                    R.Tensor((n, 4), dtype="float32"), R.Tensor((4, n), dtype="float32")
                ) = R.call_packed(
                    "two",
                    x,
                    sinfo_args=(R.Tensor((n, 4), dtype="float32"), R.Tensor((4, n), dtype="float32")),
                )
                r: R.Tuple(
                    R.Tensor((n, 4), dtype="float32"), R.Tensor((4, n), dtype="float32")
                ) = R.call_tir(
                    cls.kernel,
                    (x,),
                    out_sinfo=[R.Tensor((n, 4), dtype="float32"), R.Tensor((4, n), dtype="float32")],
                )
                s: R.Object = cls.helper(x)
                gv: R.Tensor((n, 4), dtype="float32") = R.match_cast(x_y, R.Tensor((n, 4), dtype="float32"))
                k: R.Tuple = R.vm.kill_object(x)
                return gv

            @R.function
            def helper(y: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(("m", 4), dtype="float32"):
                m = T.int64()
                return y

            @T.prim_func
            def kernel(
                A: T.Buffer(("n", 4), "float32"),
                B: T.Buffer(("n", 4), "float32"),
                C: T.Buffer((4, "n"), "float32"),
            ):
                n = T.int64()
                for i, j in T.grid(n, 4):
                    with T.block("copy"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.reads(A[vi, vj])
                        T.writes(B[vi, vj], C[0:4, 0:n])
                        B[vi, vj] = A[vi, vj]
                        C[vj, vi] = A[vi, vj]
        """,
    )


def test_long_lines_wrap_at_brackets() -> None:
    """A long return tuple, tuple annotation and call each wrap the way the seed is formatted."""
    x = Var("x", tensor(16, 16, 3, 3))
    fields = (tensor(16, 16, 3, 3), tensor(16, 3, 3, 3))
    pair = Var("pair", TupleStructInfo(fields))
    call = Call(ExternFunc("produce_both_tensors"), (x,), {}, fields)
    func = Function(
        (),
        SeqExpr((BindingBlock((bind(x, Call(ExternFunc("load"), ())), bind(pair, call))),), pair),
        pair.struct_info,
    )  # type: ignore[arg-type]
    golden(
        IRModule({"main_transform_params": func}),
        """
        # from lazyparams.script import ir as I, relax as R, tir as T

        @I.ir_module
        class Module:
            @R.function
            def main_transform_params() -> R.Tuple(
                R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")
            ):
                x: R.Tensor((16, 16, 3, 3), dtype="float32") = R.call_packed("load", sinfo_args=())
                pair: R.Tuple(
                    R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")
                ) = R.call_packed(
                    "produce_both_tensors",
                    x,
                    sinfo_args=(R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")),
                )
                return pair
        """,
    )
