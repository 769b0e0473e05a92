"""TVM 0.27's spelling read verbatim: `@I.ir_module(s_tir=True)`, `@T.prim_func(s_tir=True)`,
`T.sblock`, `out_ty=`, `ty_args=`, `R.Any`, bare ints as a call's prim values, symbolic vars
declared after `R.func_attr`; with apache-tvm installed, what TVM prints reads back too."""

from __future__ import annotations

import pytest

from lazyparams.errors import ParseError
from lazyparams.ir import PrimValue, assert_structural_equal
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from tests.script.seed_modules import Before as SeedBefore

# the seed's Before module as TVM 0.27 prints it, verbatim
TVM_SEED = """
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def transform_layout_IOHW_to_OIHW(w1: T.Buffer((3, 16, 3, 3), "float32"), out: T.Buffer((16, 3, 3, 3), "float32")):
        # with T.sblock("root"):
        for ax0, ax1, ax2, ax3 in T.grid(16, 3, 3, 3):
            with T.sblock("layout_transform"):
                o, i, h, w = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                T.reads(w1[i, o, h, w])
                T.writes(out[o, i, h, w])
                out[o, i, h, w] = w1[i, o, h, w]

    @R.function
    def main_transform_params(params: R.Tuple(R.Tensor((3, 16, 3, 3), dtype="float32"), R.Tensor((16, 16, 3, 3), dtype="float32"))) -> R.Tuple(R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")):
        cls = Module
        with R.dataflow():
            lv: R.Tensor((16, 16, 3, 3), dtype="float32") = params[1]
            lv1: R.Tensor((3, 16, 3, 3), dtype="float32") = params[0]
            lv2 = R.call_tir(cls.transform_layout_IOHW_to_OIHW, (lv1,), out_ty=R.Tensor((16, 3, 3, 3), dtype="float32"))
            gv: R.Tuple(R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")) = lv, lv2
            R.output(gv)
        return gv
"""


def test_the_seed_module_as_tvm_prints_it_reads_back_equal() -> None:
    assert_structural_equal(parse(TVM_SEED), SeedBefore, map_free_vars=True)


def test_the_tvm_decorators_and_sblock_in_a_class() -> None:
    @I.ir_module(s_tir=True)
    class Module:
        @T.prim_func(s_tir=True)
        def double(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
            for i in T.grid(4):
                with T.sblock("double"):
                    vi = T.axis.remap("S", [i])
                    b[vi] = a[vi] * T.float32(2)

        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Module
            y = R.call_tir(cls.double, (x,), out_ty=R.Tensor((4,), "float32"))
            return y

    assert 'T.block("double")' in Module.script()
    assert_structural_equal(parse(Module.script()), Module)


def test_a_bare_int_operand_of_an_extern_call_is_a_prim_value() -> None:
    mod = parse(
        """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main() -> R.Any:
        lv: R.Any = R.call_packed("get_item", 1, ty_args=(R.Any,))
        return lv
"""
    )
    call = mod["main"].body.blocks[0].bindings[0].value  # type: ignore[union-attr]
    assert isinstance(call.args[0], PrimValue)
    assert 'R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))' in mod.script()


def test_an_unknown_ir_module_option_is_refused() -> None:
    with pytest.raises(ParseError, match=r"@I.ir_module: expected one of s_tir=, got fast="):
        parse("@I.ir_module(fast=True)\nclass Module:\n    pass\n")


def test_what_tvm_prints_reads_back() -> None:
    """TVM parses its own spelling of the seed module and prints it again; that reads back."""
    pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    from tvm.script import from_source

    tvm_mod = from_source(TVM_SEED)
    assert_structural_equal(parse(tvm_mod.script()), SeedBefore, map_free_vars=True)
