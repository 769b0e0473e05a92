"""Prim values that define a symbolic var, as TVM 0.27 writes them: `extent: T.int64` as a param
(TVM's test_lift_transform_with_primitive_param_used_by_model_tensor) and as a binding of its
lifted transform; read here, run on the VM, and printed in TVM's flavour so that TVM reads it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.errors import RuntimeExecError
from lazyparams.ir import MatchCast, PrimStructInfo, assert_structural_equal
from lazyparams.ir.prim import PrimVar
from lazyparams.runtime import VirtualMachine
from lazyparams.script.parser import parse
from lazyparams.transform import LiftTransformParams

BEFORE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=1), extent: T.int64, weight: R.Tensor((extent,), dtype="float32")) -> R.Tensor(dtype="float32", ndim=1):
        R.func_attr({"num_input": 1})
        transformed: R.Tensor((extent,), dtype="float32") = R.multiply(weight, weight)
        out: R.Tensor(dtype="float32", ndim=1) = R.add(x, transformed)
        return out
"""

TVM_TRANSFORM = """
@I.ir_module
class Module:
    @R.function
    def main_transform_params(model_params: R.Tuple(T.int64, R.Tensor(dtype="float32", ndim=1))) -> R.Tuple(T.int64, R.Tensor(dtype="float32", ndim=1)):
        R.func_attr({"num_input": 0})
        extent: T.int64 = model_params[0]
        with R.dataflow():
            weight: R.Tensor((extent,), dtype="float32") = R.match_cast(model_params[1], R.Tensor((extent,), dtype="float32"))
            R.output()
        return model_params
"""


def test_a_prim_param_defines_the_symbolic_var_of_its_name() -> None:
    main = parse(BEFORE)["main"]
    extent = main.params[1].struct_info
    assert isinstance(extent, PrimStructInfo) and isinstance(extent.value, PrimVar)
    assert main.params[2].struct_info.shape == (extent.value,)  # type: ignore[attr-defined]
    well_formed(parse(BEFORE))
    x, weight = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    out = VirtualMachine(parse(BEFORE))["main"](x, 3, weight)
    np.testing.assert_array_equal(out, x + weight * weight)


def test_a_prim_binding_defines_its_var_by_a_checked_cast() -> None:
    mod = parse(TVM_TRANSFORM)
    well_formed(mod)
    first = mod["main_transform_params"].body.blocks[0].bindings[0]
    assert isinstance(first, MatchCast) and isinstance(first.struct_info, PrimStructInfo)
    weight = np.arange(3, dtype=np.float32)
    vm = VirtualMachine(mod)
    assert vm["main_transform_params"]((3, weight))[0] == 3
    with pytest.raises(RuntimeExecError, match=r"model_params|extent"):
        vm["main_transform_params"]((4, weight))  # the weight's length is not `extent`


def test_a_prim_param_defines_its_own_name_only() -> None:
    text = BEFORE.replace("extent: T.int64,", "e: T.int64,").replace("(extent,)", '("extent",)')
    main = parse(text)["main"]
    e, weight = main.params[1].struct_info, main.params[2].struct_info
    assert isinstance(e, PrimStructInfo) and isinstance(e.value, PrimVar)
    assert e.value.name == "e" and weight.shape[0].name == "extent"  # type: ignore[union-attr]
    assert weight.shape[0] is not e.value  # type: ignore[union-attr]


def test_our_flavour_reads_back_equal() -> None:
    for text in (BEFORE, TVM_TRANSFORM):
        mod = parse(text)
        assert_structural_equal(parse(mod.script()), mod)
        assert_structural_equal(parse(mod.script(flavor="tvm")), mod)


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")
    return tvm


def test_tvm_reads_our_lift_of_a_prim_param_and_runs_it_alike() -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    lifted = LiftTransformParams(shared_transform=False)(parse(BEFORE))
    theirs = from_source(lifted.script(flavor="tvm"))
    relax.analysis.well_formed(theirs)
    # TVM 0.27's R.Prim takes no value: inside the transform's tuple param `extent` is a plain
    # int64 there (the weight's shape still defines it), so compare what the two compute
    back = parse(theirs.script())
    weight, x = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    ours, read = VirtualMachine(lifted), VirtualMachine(back)
    (mine,) = ours["main_transform_params"]((3, weight))
    (their,) = read["main_transform_params"]((3, weight))
    np.testing.assert_array_equal(ours["main"](x, mine), read["main"](x, their))
    tvm_main = from_source(parse(BEFORE).script(flavor="tvm"))
    tvm.ir.assert_structural_equal(tvm_main, from_source(BEFORE))
