"""Structural equality and hashing of Relax nodes, struct info, prim exprs and modules."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import LazyParamsError
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
    Op,
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
    assert_structural_equal,
    structural_equal,
    structural_hash,
)
from lazyparams.ir import prim as P
from lazyparams.ir.structural import first_mismatch

F32 = TensorStructInfo((3, 4), "float32")
ADD, MUL = Op("add"), Op("multiply")


def equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Equality, checking on the way that equal values hash alike."""
    result = structural_equal(a, b, map_free_vars)
    assert result == structural_equal(b, a, map_free_vars), "equality must be symmetric"
    if result:
        assert structural_hash(a) == structural_hash(b)
    return result


def func(
    body: list[tuple[str, Any]] | None = None,
    *,
    param_sinfo: Any = F32,
    dataflow: bool = False,
    arity: int = 1,
    suffix: str = "a",
    **kwargs: Any,
) -> Function:
    """`def f(x, y..): lv = value(env); ...; return last`, values built from the vars so far.

    Var names end in `suffix`, so two calls build the same function with different names.
    """
    keys = "xyz"[:arity]
    params = tuple(Var(f"{k}_{suffix}", param_sinfo) for k in keys)
    env: dict[str, Any] = dict(zip(keys, params, strict=True))
    bindings = []
    for name, build in body or [("lv", lambda e: Call(ADD, (e["x"], e["x"])))]:
        cls = DataflowVar if dataflow and name.startswith("lv") else Var
        var = cls(f"{name}_{suffix}", F32)
        bindings.append(VarBinding(var, build(env)))
        env[name] = var
    block = (DataflowBlock if dataflow else BindingBlock)(tuple(bindings))
    result = env.get("gv", bindings[-1].var)
    return Function(params, SeqExpr((block,), result), F32, **kwargs)


# Vars and binding ---------------------------------------------------------------------------


def test_functions_equal_up_to_var_names() -> None:
    assert equal(func(suffix="a"), func(suffix="b"))


def test_free_vars_equal_only_themselves_unless_mapped() -> None:
    a, b = Var("a", F32), Var("b", F32)
    assert equal(a, a)
    assert not equal(a, b)
    assert equal(a, b, map_free_vars=True)
    assert not equal(a, Var("c", TensorStructInfo((4, 3), "float32")), map_free_vars=True)


def test_free_vars_map_one_to_one() -> None:
    a, b, c = (Var(n, F32) for n in "abc")
    assert equal(Tuple((a, a)), Tuple((b, b)), map_free_vars=True)
    assert not equal(Tuple((a, a)), Tuple((b, c)), map_free_vars=True)
    assert not equal(Tuple((a, b)), Tuple((c, c)), map_free_vars=True)


def test_free_var_inside_a_function() -> None:
    outer_a, outer_b = Var("w", F32), Var("w", F32)
    fa = func([("lv", lambda e: Call(ADD, (e["x"], outer_a)))])
    fb = func([("lv", lambda e: Call(ADD, (e["x"], outer_b)))])
    fa_again = func([("lv", lambda e: Call(ADD, (e["x"], outer_a)))])
    assert not equal(fa, fb)
    assert equal(fa, fb, map_free_vars=True)
    assert equal(fa, fa_again)


def test_uses_must_follow_the_same_definitions() -> None:
    two = [
        ("lv", lambda e: Call(ADD, (e["x"], e["x"]))),
        ("lv1", lambda e: Call(ADD, (e["lv"], e["x"]))),
    ]
    swapped = [
        ("lv", lambda e: Call(ADD, (e["x"], e["x"]))),
        ("lv1", lambda e: Call(ADD, (e["x"], e["lv"]))),
    ]
    assert not equal(func(two), func(swapped))
    params_ab = func([("lv", lambda e: Call(ADD, (e["x"], e["y"])))], arity=2)
    params_ba = func([("lv", lambda e: Call(ADD, (e["y"], e["x"])))], arity=2)
    assert not equal(params_ab, params_ba)


def test_struct_info_of_defined_vars_matters() -> None:
    assert not equal(func(param_sinfo=F32), func(param_sinfo=TensorStructInfo((3, 4), "float16")))


def test_var_without_struct_info_counts_as_object() -> None:
    assert equal(Var("a"), Var("b", ObjectStructInfo()), map_free_vars=True)


def test_var_and_dataflow_var_differ() -> None:
    assert not equal(func(dataflow=False), func(dataflow=True))
    assert not equal(Var("a", F32), DataflowVar("a", F32), map_free_vars=True)


def test_binding_block_and_dataflow_block_differ() -> None:
    x = Var("x", F32)
    plain = SeqExpr((BindingBlock(()),), x)
    dataflow = SeqExpr((DataflowBlock(()),), x)
    assert not equal(plain, dataflow)


def test_var_defined_twice_must_pair_the_same_way() -> None:
    x = Var("x", F32)
    v, w = Var("v", F32), Var("w", F32)
    twice = SeqExpr((BindingBlock((VarBinding(v, x), VarBinding(v, x))),), v)
    distinct = SeqExpr((BindingBlock((VarBinding(v, x), VarBinding(w, x))),), w)
    assert equal(twice, twice)
    assert not equal(twice, distinct)


def test_match_cast_defines_symbolic_dims() -> None:
    x = Var("x")

    def cast_then_use(dim_name: str, cast: bool = True) -> SeqExpr:
        n = P.PrimVar(dim_name)
        y = Var("y", TensorStructInfo((n, 4), "float32"))
        shape = Var("s", ShapeStructInfo((n * 2,)))
        define = MatchCast(y, x, TensorStructInfo((n, 4), "float32")) if cast else VarBinding(y, x)
        bindings = (define, VarBinding(shape, ShapeExpr((n * 2,))))
        return SeqExpr((BindingBlock(bindings),), shape)

    assert equal(cast_then_use("n"), cast_then_use("m"))
    assert not equal(cast_then_use("n", cast=False), cast_then_use("m", cast=False))
    assert equal(cast_then_use("n", cast=False), cast_then_use("m", cast=False), map_free_vars=True)


def test_symbolic_dims_of_params_are_definitions() -> None:
    def with_dim(name: str, use_param_dim: bool = True) -> Function:
        n = P.PrimVar(name)
        other = P.PrimVar("k")
        x = Var("x", TensorStructInfo((n, 4), "float32"))
        v = Var("v", ShapeStructInfo((n if use_param_dim else other,)))
        body = SeqExpr(
            (BindingBlock((VarBinding(v, ShapeExpr((n if use_param_dim else other,))),)),), v
        )
        return Function((x,), body, ObjectStructInfo())

    assert equal(with_dim("n"), with_dim("m"))
    assert not equal(with_dim("n"), with_dim("m", use_param_dim=False))


# Leaves and calls ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("same", "other"),
    [
        (GlobalVar("f"), GlobalVar("g")),
        (ExternFunc("get_item"), ExternFunc("set_item")),
        (Op("add"), Op("multiply")),
        (StringImm("a"), StringImm("b")),
        (PrimValue(P.IntImm(1)), PrimValue(P.IntImm(2))),
        (PrimValue(P.IntImm(1)), PrimValue(P.IntImm(1, "int32"))),
        (ShapeExpr((P.IntImm(3),)), ShapeExpr((P.IntImm(3), P.IntImm(1)))),
        (Tuple(()), Tuple((StringImm("a"),))),
        (
            TupleGetItem(Tuple((StringImm("a"), StringImm("a"))), 0),
            TupleGetItem(Tuple((StringImm("a"), StringImm("a"))), 1),
        ),
    ],
)
def test_leaf_nodes_compare_by_value(same: Any, other: Any) -> None:
    twin = type(same)(*(getattr(same, f) for f in same.__dataclass_fields__))
    assert same is not twin and equal(same, twin)
    assert not equal(same, other)


def test_global_vars_compare_by_name_not_identity() -> None:
    assert equal(GlobalVar("f"), GlobalVar("f"))


def test_constants_compare_by_dtype_shape_and_bytes() -> None:
    base = Constant(np.arange(6, dtype="float32").reshape(2, 3))
    assert equal(base, Constant(np.arange(6, dtype="float32").reshape(2, 3)))
    assert equal(base, Constant(np.asfortranarray(np.arange(6, dtype="float32").reshape(2, 3))))
    assert not equal(base, Constant(np.arange(6, dtype="float16").reshape(2, 3)))
    assert not equal(base, Constant(np.arange(6, dtype="float32").reshape(3, 2)))
    assert not equal(base, Constant(np.arange(1, 7, dtype="float32").reshape(2, 3)))
    assert not equal(Constant(np.array(0.0)), Constant(np.array(-0.0)))
    assert equal(Constant(np.array(np.nan)), Constant(np.array(np.nan)))


def test_calls_compare_op_args_attrs_and_sinfo_args() -> None:
    x = Var("x", F32)
    call = Call(Op("permute_dims"), (x,), {"axes": (1, 0)})
    assert equal(call, Call(Op("permute_dims"), (x,), {"axes": [1, 0]}))
    assert not equal(call, Call(Op("permute_dims"), (x,), {"axes": (0, 1)}))
    assert not equal(call, Call(Op("permute_dims"), (x,), {"axes": None}))
    assert not equal(call, Call(Op("permute_dims"), (x,), {}))
    assert not equal(call, Call(Op("transpose"), (x,), {"axes": (1, 0)}))
    assert not equal(call, Call(Op("permute_dims"), (x, x), {"axes": (1, 0)}))
    packed = Call(ExternFunc("get_item"), (PrimValue(P.IntImm(0)),), {}, (ObjectStructInfo(),))
    assert not equal(packed, Call(packed.op, packed.args, {}, (F32,)))


@pytest.mark.parametrize(
    ("value", "other"),
    [
        (1, 1.0),
        (1, True),
        (0.5, 0.25),
        ("float16", "float32"),
        (None, 0),
        ((1, 2), (1, 2, 3)),
        (P.IntImm(4), 4),
        ({"a": 1}, {"b": 1}),
    ],
)
def test_attr_values_compare_exactly(value: Any, other: Any) -> None:
    x = Var("x", F32)
    assert equal(Call(ADD, (x,), {"k": value}), Call(ADD, (x,), {"k": value}))
    assert not equal(Call(ADD, (x,), {"k": value}), Call(ADD, (x,), {"k": other}))


def test_numpy_scalars_in_attrs_act_as_python_numbers() -> None:
    x = Var("x", F32)
    assert equal(Call(ADD, (x,), {"axis": np.int64(1)}), Call(ADD, (x,), {"axis": 1}))


def test_function_fields_all_count() -> None:
    base = func()
    assert not equal(base, func(is_pure=False))
    assert not equal(base, func(attrs={"num_input": 1}))
    ret = Function(base.params, base.body, TensorStructInfo(None, "float32", 2))
    assert not equal(base, ret)


def test_unsupported_values_are_refused_clearly() -> None:
    with pytest.raises(LazyParamsError, match=r"expected an IR node.*got object"):
        structural_equal(object(), object())


# Struct info and prim exprs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("same", "other"),
    [
        (ObjectStructInfo(), PrimStructInfo("int64")),
        (PrimStructInfo("int64"), PrimStructInfo("int32")),
        (PrimStructInfo("int64", P.IntImm(3)), PrimStructInfo("int64")),
        (ShapeStructInfo((P.IntImm(2),)), ShapeStructInfo(None, 1)),
        (F32, TensorStructInfo((4, 3), "float32")),
        (F32, TensorStructInfo(None, "float32", 2)),
        (TensorStructInfo(None, "float32", 2), TensorStructInfo(None, "float32", 3)),
        (TupleStructInfo((F32,)), TupleStructInfo((F32, F32))),
        (FuncStructInfo((F32,), F32), FuncStructInfo(None, F32)),
        (FuncStructInfo((F32,), F32), FuncStructInfo((F32,), F32, purity=False)),
    ],
)
def test_struct_info_compares_every_field(same: Any, other: Any) -> None:
    assert equal(same, same)
    assert not equal(same, other)


def test_prim_exprs_compare_by_structure() -> None:
    i, j = P.PrimVar("i"), P.PrimVar("j")
    cases = [
        P.Add(i, j), P.Sub(i, j), P.Mul(i, j), P.Div(i, j), P.FloorDiv(i, j), P.FloorMod(i, j),
        P.Min(i, j), P.Max(i, j), P.EQ(i, j), P.NE(i, j), P.LT(i, j), P.LE(i, j), P.GT(i, j),
        P.GE(i, j), P.And(i, j), P.Or(i, j), P.Not(i), P.Cast("float32", i),
        P.Select(i, j, i), P.Intrinsic("exp", (i,)), P.Intrinsic("log", (i,)),
        P.IntImm(1), P.FloatImm(1.0), P.FloatImm(1.0, "float16"), P.StringImm("s"),
    ]  # fmt: skip
    for index, expr in enumerate(cases):
        for other_index, other in enumerate(cases):
            assert equal(expr, other) == (index == other_index), (expr, other)
    assert not equal(P.Add(i, j), P.Add(j, i))
    assert equal(P.Add(i, j), P.Add(j, i), map_free_vars=True)


def test_deep_prim_expression_is_walked_without_recursion() -> None:
    a: P.PrimExpr = P.PrimVar("n")
    b: P.PrimExpr = P.PrimVar("m")
    for k in range(20_000):
        a, b = P.Add(a, P.IntImm(k)), P.Add(b, P.IntImm(k))
    assert equal(a, b, map_free_vars=True)


# Modules and messages ---------------------------------------------------------------------------


def test_modules_match_functions_by_name_in_any_order() -> None:
    f, g = func(), func([("lv", lambda e: Call(MUL, (e["x"], e["x"])))], suffix="b")
    assert equal(IRModule({"f": f, "g": g}), IRModule({"g": g, "f": f}))
    assert not equal(IRModule({"f": f, "g": g}), IRModule({"f": g, "g": f}))
    assert not equal(IRModule({"f": f}), IRModule({"f": f, "g": g}))
    assert not equal(IRModule({"f": f}), IRModule({"f": f}, attrs={"a": 1}))


def _three_bindings(last_operand: str) -> IRModule:
    body = [
        ("lv", lambda e: Call(ADD, (e["x"], e["x"]))),
        ("lv1", lambda e: Call(ADD, (e["lv"], e["x"]))),
        ("lv2", lambda e: Call(MUL, (e["lv1"], e[last_operand]))),
    ]
    return IRModule({"main": func(body)})


def _refuse(mod: IRModule, flavor: str = "lazyparams") -> str:
    raise LazyParamsError("cannot print this module")


def test_assert_names_the_first_differing_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(IRModule, "script", _refuse)  # a module the printer rejects: a repr
    with pytest.raises(AssertionError) as err:
        assert_structural_equal(_three_bindings("x"), _three_bindings("lv"))
    text = str(err.value)
    assert 'at Module["main"].body.blocks[0].bindings[2].value.args[1]:' in text
    assert (
        "--- lhs ---\nmain: Function(params=(Var('x_a'),)" in text and "--- rhs ---\nmain:" in text
    )


def test_assert_prints_both_sides_with_the_script_printer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(IRModule, "script", lambda mod: f"# script of {mod.names()}")
    with pytest.raises(AssertionError, match=r"--- lhs ---\n# script of \['main'\]"):
        assert_structural_equal(_three_bindings("x"), _three_bindings("lv"))
    with pytest.raises(AssertionError, match=r"--- rhs ---\n# script of \['main'\]"):
        assert_structural_equal(func(), func(is_pure=False))


def test_assert_passes_silently_when_equal() -> None:
    assert_structural_equal(_three_bindings("x"), _three_bindings("x"))


def test_mismatch_reasons_say_what_differs() -> None:
    mismatch = first_mismatch(Tuple((Var("a", F32),)), Tuple((Var("b", F32),)))
    assert mismatch is not None and mismatch.path == "Tuple.fields[0]"
    assert "free vars differ" in mismatch.reason and "map_free_vars=True" in mismatch.reason
    mismatch = first_mismatch(F32, TensorStructInfo((3, 4), "float16"))
    assert mismatch is not None and mismatch.path == "TensorStructInfo.dtype"
    assert mismatch.reason == "values differ: str 'float32' vs str 'float16'"
