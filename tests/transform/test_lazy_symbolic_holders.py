"""LazyTransformParams keeps an `R.Shape` / `R.Prim` weight that defines symbolic vars as a
param, `symbolic_var_holder`, as TVM does: the caller passes the vars, nothing loads the shape,
and the loaded tensors are checked against it. TVM's own Before module read verbatim."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.ir import Function, ShapeStructInfo
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams
from tests.script.tvm_modules import LAZY_SYMBOLIC_VARS
from tests.transform.harness import Store, check_pass

STRICT = LazyTransformParams(strict=True)
FUNC = "main_transform_params"


@I.ir_module
class Expected:
    @R.function(pure=False)
    def main_transform_params(symbolic_var_holder: R.Shape(["slice_index"])) -> R.Tuple(R.Object):
        slice_index = T.int64()
        cls = Expected
        param: R.Tensor((16, 16), dtype="float32") = R.match_cast(
            R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
            R.Tensor((16, 16), dtype="float32"),
        )
        transformed: R.Tensor((16,), dtype="float32") = R.call_tir(
            cls.slice_buffer,
            (param, R.prim_value(slice_index)),
            out_sinfo=R.Tensor((16,), dtype="float32"),
        )
        lv: R.Object = R.call_packed(
            "set_item", R.prim_value(0), transformed, sinfo_args=(R.Object,)
        )
        lv_1: R.Tuple = R.vm.kill_object(param)
        output: R.Tuple(R.Object) = (lv,)
        return output

    @T.prim_func(private=True)
    def slice_buffer(
        Input: T.Buffer((16, 16), "float32"),
        slice_index: T.int64,
        Output: T.Buffer((16,), "float32"),
    ):
        for i in range(16):
            with T.block("slice_buffer"):
                vi = T.axis.remap("S", [i])
                Output[vi] = Input[slice_index, vi]


@I.ir_module
class PerParam:
    @R.function
    def main_transform_params(w: R.Tensor(("n", 4), "float32"), s: R.Shape(["n"])) -> R.Tuple(
        R.Tensor((4, "n"), "float32")
    ):
        n = T.int64()
        t = R.permute_dims(w, [1, 0])
        return (t,)


def test_the_shape_weight_stays_a_param_and_is_not_loaded() -> None:
    check_pass(STRICT, parse(LAZY_SYMBOLIC_VARS), Expected)
    func = LazyTransformParams()(parse(LAZY_SYMBOLIC_VARS))["main_transform_params"]
    assert isinstance(func, Function)  # the seed's form keeps the holder too
    assert [p.name_hint for p in func.params] == ["symbolic_var_holder"]


def test_the_holder_gives_the_slice_index_to_the_kernel() -> None:
    weight = np.arange(256, dtype="float32").reshape(16, 16)
    store = Store((weight, None))
    externs = {"get_item": store.get_item, "set_item": store.set_item}
    VirtualMachine(STRICT(parse(LAZY_SYMBOLIC_VARS)), externs)[FUNC]((7,))
    assert store.loads == [0]
    np.testing.assert_array_equal(store.outputs[0], weight[7])


def test_a_per_param_shape_weight_is_held_and_checks_the_loaded_tensor() -> None:
    after = STRICT(PerParam)[FUNC]
    assert isinstance(after, Function)
    (holder,) = after.params
    assert holder.name_hint == "symbolic_var_holder"
    assert isinstance(holder.struct_info, ShapeStructInfo)
    w = np.arange(12, dtype="float32").reshape(3, 4)
    store = Store((w, (3,)))
    vm = VirtualMachine(STRICT(PerParam), {"get_item": store.get_item, "set_item": store.set_item})
    vm[FUNC]((3,))
    np.testing.assert_array_equal(store.outputs[0], w.T)
    wrong = Store((w, (3,)))
    vm = VirtualMachine(STRICT(PerParam), {"get_item": wrong.get_item, "set_item": wrong.set_item})
    with pytest.raises(
        RuntimeExecError,
        match=r"get_item\(0\): expected R.Tensor\(\(n, 4\), \"float32\"\), got float32 array of shape \(3, 4\) \(with n = 5\)",
    ):
        vm[FUNC]((5,))  # the holder says n = 5, the checkpoint's tensor has 3 rows


def test_no_symbolic_vars_no_holder() -> None:
    @I.ir_module
    class Static:
        @R.function
        def main_transform_params(w: R.Tensor((3, 4), "float32"), s: R.Shape([3])) -> R.Tuple(
            R.Tensor((4, 3), "float32")
        ):
            t = R.permute_dims(w, [1, 0])
            return (t,)

    after = STRICT(Static)[FUNC]
    assert isinstance(after, Function) and after.params == ()


def test_tvm_runs_our_print_with_the_holder_and_agrees() -> None:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    from tvm import relax
    from tvm.script import from_source

    ours = STRICT(parse(LAZY_SYMBOLIC_VARS))
    theirs = from_source(ours.script(flavor="tvm"))
    relax.analysis.well_formed(theirs)  # raises on the first violation
    weight = np.arange(256, dtype="float32").reshape(16, 16)
    got: dict[int, Any] = {}
    tvm.register_global_func("get_item", lambda i: tvm.runtime.tensor(weight), override=True)
    tvm.register_global_func(
        "set_item", lambda i, v: got.__setitem__(int(i), v.numpy()), override=True
    )
    vm = relax.VirtualMachine(tvm.compile(theirs, target="llvm"), tvm.cpu())
    vm[FUNC](tvm.runtime.ShapeTuple([5]))
    np.testing.assert_array_equal(got[0], weight[5])
