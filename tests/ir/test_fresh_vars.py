"""with_fresh_prim_vars: a copy of a function binding symbolic vars of its own."""

from __future__ import annotations

from lazyparams.analysis import well_formed
from lazyparams.ir import Function, assert_structural_equal
from lazyparams.ir.fresh_vars import with_fresh_prim_vars
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform.util import prim_vars


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), w: R.Tensor(("m", 4), "float32")) -> R.Tensor(
        ("n", 4), "float32"
    ):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.add(y, y)
            R.output(z)
        return z

    @R.function
    def fixed(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.add(x, x)
        return y


def _func(name: str) -> Function:
    func = Module[name]
    assert isinstance(func, Function)
    return func


def test_the_copy_has_new_symbolic_vars_and_the_same_structure() -> None:
    func = _func("main")
    copy = with_fresh_prim_vars(func)
    old = {v for p in func.params for v in prim_vars(p.struct_info)}
    new = {v for p in copy.params for v in prim_vars(p.struct_info)}
    assert {v.name for v in old} == {v.name for v in new} == {"n", "m"}
    assert not old & new
    assert_structural_equal(copy, func, map_free_vars=True)
    well_formed(Module.with_function("main", copy))


def test_relax_vars_stay_consistent_between_binding_and_use() -> None:
    copy = with_fresh_prim_vars(_func("main"))
    bindings = list(copy.bindings())
    assert bindings[1].value.args[0] is bindings[0].var
    assert copy.body.body is bindings[1].var


def test_a_function_without_symbolic_vars_is_returned_as_it_is() -> None:
    assert with_fresh_prim_vars(_func("fixed")) is _func("fixed")
