"""well_formed: one test per rule (with its message), and clean passes on good modules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from lazyparams import op
from lazyparams.analysis import well_formed
from lazyparams.errors import WellFormedError
from lazyparams.ir import (
    BindingBlock,
    Call,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    IRModule,
    MatchCast,
    ObjectStructInfo,
    Op,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
)
from lazyparams.ir.prim import IntImm, PrimVar
from lazyparams.tir.nodes import Block, Buffer, BufferLoad, BufferStore, For, IterVar, PrimFunc
from tests.programs import SETTINGS, transform_programs

F32 = TensorStructInfo((3, 4), "float32")
OBJ = ObjectStructInfo()


def main(
    blocks: list[BindingBlock], result: Any, params: tuple[Var, ...], **extra: Any
) -> IRModule:
    """A module whose `main` has `params`, `blocks` and returns `result`."""
    func = Function(params, SeqExpr(tuple(blocks), result), OBJ)
    return IRModule({"main": func, **extra})


def plain(*bindings: Any) -> BindingBlock:
    return BindingBlock(tuple(bindings))


def dataflow(*bindings: Any) -> DataflowBlock:
    return DataflowBlock(tuple(bindings))


def bind(name: str, value: Any, sinfo: Any = F32, cls: type[Var] = Var) -> VarBinding:
    return VarBinding(cls(name, sinfo), value)


def fails(mod: Any, message: str, **kwargs: Any) -> None:
    with pytest.raises(WellFormedError) as err:
        well_formed(mod, **kwargs)
    assert message in str(err.value), str(err.value)


# The seed's modules, built by hand --------------------------------------------------------------


def layout_kernel() -> PrimFunc:
    """`out[o, i] = w[i, o]` for w of shape (3, 16) and out of shape (16, 3)."""
    w, out = Buffer("w", (IntImm(3), IntImm(16))), Buffer("out", (IntImm(16), IntImm(3)))
    ax0, ax1, o, i = (PrimVar(n) for n in ("ax0", "ax1", "o", "i"))
    iters = (IterVar(o, IntImm(16), "S", ax0), IterVar(i, IntImm(3), "S", ax1))
    block = Block("layout", iters, (), (), BufferStore(out, BufferLoad(w, (i, o)), (o, i)))
    loops = For(ax0, IntImm(0), IntImm(16), For(ax1, IntImm(0), IntImm(3), block))
    return PrimFunc((w, out), loops)


def seed_before() -> IRModule:
    kernel = GlobalVar("layout")
    a, b = TensorStructInfo((3, 16), "float32"), TensorStructInfo((16, 16), "float32")
    params = Var("params", TupleStructInfo((a, b)))
    lv = DataflowVar("lv", b)
    lv1 = DataflowVar("lv1", a)
    lv2 = DataflowVar("lv2", TensorStructInfo((16, 3), "float32"))
    gv = Var("gv", TupleStructInfo((b, lv2.struct_info)))  # type: ignore[arg-type]
    block = dataflow(
        VarBinding(lv, TupleGetItem(params, 1)),
        VarBinding(lv1, TupleGetItem(params, 0)),
        VarBinding(lv2, op.call_tir(kernel, (lv1,), lv2.struct_info)),  # type: ignore[arg-type]
        VarBinding(gv, Tuple((lv, lv2))),
    )
    return main([block], gv, (params,), layout=layout_kernel())


def seed_expected() -> IRModule:
    lv, lv1, lv2, lv1_1, lv3, lv4, lv5 = (
        DataflowVar(n, OBJ) for n in ("lv", "lv1", "lv2", "lv1_1", "lv3", "lv4", "lv5")
    )
    gv = Var("gv", TupleStructInfo((OBJ, OBJ)))
    block = dataflow(
        VarBinding(lv, op.call_packed("get_item", op.prim_value(1))),
        VarBinding(lv1, op.call_packed("set_item", op.prim_value(0), lv)),
        VarBinding(lv2, op.kill_object(lv)),
        VarBinding(lv1_1, op.call_packed("get_item", op.prim_value(0))),
        VarBinding(
            lv3, op.call_tir(GlobalVar("layout"), (lv1_1,), TensorStructInfo((16, 3), "float32"))
        ),
        VarBinding(lv4, op.call_packed("set_item", op.prim_value(1), lv3)),
        VarBinding(lv5, op.kill_object(lv1_1)),
        VarBinding(gv, Tuple((lv1, lv4))),
    )
    return main([block], gv, (), layout=layout_kernel())


def test_the_seed_input_is_well_formed() -> None:
    well_formed(seed_before())


def test_the_seed_lazy_output_breaks_only_the_purity_rule() -> None:
    fails(
        seed_expected(),
        'binding 0 `lv = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))`: impure call R.call_packed("get_item") inside a dataflow block',
    )
    well_formed(seed_expected(), check_purity=False)


@SETTINGS
@given(transform_programs())
def test_random_transform_programs_are_well_formed(mod: IRModule) -> None:
    well_formed(mod)


# One test per rule ------------------------------------------------------------------------------


def test_use_before_definition() -> None:
    x, later = Var("x", F32), Var("lv1", F32)
    mod = main([plain(bind("lv", op.add(later, x)), VarBinding(later, op.add(x, x)))], later, (x,))
    fails(
        mod,
        "function 'main', binding 0 `lv = R.add(lv1, x)`: var 'lv1' is used before its definition",
    )


def test_var_defined_twice() -> None:
    x, lv = Var("x", F32), Var("lv", F32)
    mod = main([plain(VarBinding(lv, op.add(x, x)), VarBinding(lv, op.add(lv, x)))], lv, (x,))
    fails(mod, "binding 1 `lv = R.add(lv, x)`: var 'lv' is defined twice: first at binding 0")
    fails(main([], x, (x, x)), "param 1 `x`: var 'x' is defined twice: first at param 0")


def test_dataflow_var_used_after_its_block() -> None:
    x, lv = Var("x", F32), DataflowVar("lv", F32)
    fails(
        main([dataflow(VarBinding(lv, op.add(x, x)))], lv, (x,)),
        "the result `lv`: DataflowVar 'lv' is used outside the dataflow block that defines it",
    )
    later = plain(bind("gv", op.add(lv, x)))
    fails(
        main([dataflow(VarBinding(lv, op.add(x, x))), later], x, (x,)),
        "binding 1 `gv = R.add(lv, x)`: DataflowVar 'lv' is used outside",
    )


def test_dataflow_var_bound_outside_a_dataflow_block() -> None:
    x = Var("x", F32)
    mod = main([plain(bind("lv", op.add(x, x), cls=DataflowVar))], x, (x,))
    fails(
        mod,
        "binding 0 `lv = R.add(x, x)`: DataflowVar 'lv' is bound outside a dataflow block; expected a Var",
    )
    fails(
        main([], x, (DataflowVar("p", F32),)),
        "param 0 `p`: DataflowVar 'p' is a function param; expected a Var",
    )


def test_impure_call_inside_a_dataflow_block() -> None:
    x = Var("x", F32)
    kill = dataflow(bind("lv", op.kill_object(x), TupleStructInfo(()), DataflowVar))
    fails(
        main([kill], x, (x,)),
        "binding 0 `lv = R.vm.kill_object(x)`: impure call R.vm.kill_object inside a dataflow block; expected only pure calls there",
    )
    well_formed(main([kill], x, (x,)), check_purity=False)
    nested = dataflow(
        bind("lv", Tuple((op.call_packed("f", x),)), TupleStructInfo((OBJ,)), DataflowVar)
    )
    fails(main([nested], x, (x,)), 'impure call R.call_packed("f") inside a dataflow block')
    well_formed(main([plain(bind("lv", op.kill_object(x), TupleStructInfo(())))], x, (x,)))


@pytest.mark.parametrize(
    "annotation",
    [
        OBJ,
        F32,
        TensorStructInfo(None, "float32", 2),
        TensorStructInfo(None, "float32"),
        TensorStructInfo(None, ""),
    ],
)
def test_annotations_equal_or_less_specific_are_accepted(annotation: Any) -> None:
    x = Var("x", F32)
    well_formed(main([plain(bind("lv", op.add(x, x), annotation))], x, (x,)))


@pytest.mark.parametrize(
    ("annotation", "inferred"),
    [
        (TensorStructInfo((3, 4), "float16"), 'R.Tensor((3, 4), "float32")'),
        (TensorStructInfo((4, 3), "float32"), 'R.Tensor((3, 4), "float32")'),
        (TensorStructInfo(None, "float32", 3), 'R.Tensor((3, 4), "float32")'),
        (TupleStructInfo((F32,)), 'R.Tensor((3, 4), "float32")'),
    ],
)
def test_annotation_contradicting_the_inference(annotation: Any, inferred: str) -> None:
    x = Var("x", F32)
    mod = main([plain(bind("lv", op.add(x, x), annotation))], x, (x,))
    fails(
        mod,
        f"var 'lv' is annotated {op.describe(annotation)}, which contradicts the inferred struct info; expected {inferred} or a less specific form of it",
    )


def test_annotation_more_specific_than_an_extern_result_needs_match_cast() -> None:
    x = Var("x", F32)
    fails(
        main([plain(bind("lv", op.call_packed("f", x)))], x, (x,)),
        "expected R.Object or a less specific form of it",
    )
    n = PrimVar("n")
    cast = MatchCast(
        Var("lv", TensorStructInfo((n, 4), "float32")),
        op.call_packed("f", x),
        TensorStructInfo((n, 4), "float32"),
    )
    well_formed(main([plain(cast)], x, (x,)))
    bad = MatchCast(
        Var("lv", TensorStructInfo((n, 4), "float16")), x, TensorStructInfo((n, 4), "float32")
    )
    fails(main([plain(bad)], x, (x,)), "contradicts the match_cast struct info")


def test_operands_an_op_rejects() -> None:
    x, y = Var("x", F32), Var("y", TensorStructInfo((5, 4), "float32"))
    mod = main([plain(bind("lv", Call(op.add(x, x).op, (x, y))))], x, (x, y))
    fails(mod, "binding 0 `lv = R.add(x, y)`: struct info cannot be inferred:")
    fails(
        main([plain(bind("lv", Call(Op("no_such_op"), (x,))))], x, (x,)), "unknown op R.no_such_op"
    )


def test_call_tir_target_must_be_a_prim_func_of_the_module() -> None:
    x = Var("x", F32)
    call = op.call_tir(GlobalVar("kernel"), (x,), F32)
    fails(
        main([plain(bind("lv", call))], x, (x,)),
        "binding 0 `lv = R.call_tir(cls.kernel, (x,), out_sinfo=R.Tensor((3, 4), \"float32\"))`: cls.kernel is not a function of the module; expected one of ['main']",
    )
    relax_kernel = Function((), SeqExpr((), x), F32)
    fails(
        main([plain(bind("lv", call))], x, (x,), kernel=relax_kernel),
        "R.call_tir calls cls.kernel; expected a PrimFunc, got a Function",
    )
    well_formed(main([plain(bind("lv", call))], x, (x,), kernel=layout_kernel()))
    well_formed(main([plain(bind("lv", call))], x, (x,)).__getitem__("main"))  # type: ignore[arg-type]


def test_call_of_a_missing_global_function() -> None:
    x = Var("x", F32)
    call = Call(GlobalVar("helper"), (x,), {}, (F32,))
    fails(main([plain(bind("lv", call))], x, (x,)), "cls.helper is not a function of the module")


def test_tuple_index_out_of_range() -> None:
    params = Var("params", TupleStructInfo((F32, F32)))
    fails(
        main([plain(bind("w", TupleGetItem(params, 2)))], params, (params,)),
        "binding 0 `w = params[2]`: tuple index out of range: expected 0 <= index < 2, got 2",
    )
    x = Var("x", F32)
    fails(
        main([plain(bind("w", TupleGetItem(x, 0)))], x, (x,)),
        'indexing [0] needs a tuple; expected R.Tuple, got R.Tensor((3, 4), "float32")',
    )


def test_symbolic_dims_used_before_definition() -> None:
    n, m = PrimVar("n"), PrimVar("m")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    well_formed(
        main(
            [plain(bind("lv", op.reshape(x, (4, n)), TensorStructInfo((4, n), "float32")))], x, (x,)
        )
    )
    fails(
        main([plain(bind("lv", op.add(x, x), TensorStructInfo((m, 4), "float32")))], x, (x,)),
        "binding 0 `lv = R.add(x, x)`: symbolic dim 'm' is used before its definition",
    )
    y = Var("y", TensorStructInfo((m, 4), "float32"))
    reshape_m = bind("lv", op.reshape(x, (m, 4)), TensorStructInfo(None, "float32", 2))
    cast = MatchCast(y, x, TensorStructInfo((m, 4), "float32"))
    fails(
        main([plain(reshape_m, cast)], x, (x,)),
        "binding 0 `lv = R.reshape(x, shape=[m, 4])`: symbolic dim 'm'",
    )
    well_formed(main([plain(cast, reshape_m)], x, (x,)))
    ret_m = Function((x,), SeqExpr((), x), TensorStructInfo((m, 4), "float32"))
    fails(ret_m, "function 'main', the return struct info: symbolic dim 'm'")


def test_nested_functions_see_the_outer_scope_only_inward() -> None:
    x, y = Var("x", F32), Var("y", F32)
    inner_lv = Var("inner", F32)
    inner = Function((y,), SeqExpr((plain(VarBinding(inner_lv, op.add(x, y))),), inner_lv), F32)
    closure = Var("f", OBJ)
    good = main([plain(VarBinding(closure, inner))], closure, (x,))
    well_formed(good)
    leak = main([plain(VarBinding(closure, inner), bind("lv", op.add(inner_lv, x)))], x, (x,))
    fails(
        leak, "binding 1 `lv = R.add(inner, x)`: var 'inner' is used outside its scope (binding 0)"
    )


def test_only_modules_and_functions_are_checked() -> None:
    with pytest.raises(WellFormedError, match="expected an IRModule or a Function, got Var"):
        well_formed(Var("x"))  # type: ignore[arg-type]
