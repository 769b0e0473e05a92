"""KillAfterLastUse: every owned value is freed right after its last use, nothing else is."""

from __future__ import annotations

import numpy as np
import pytest

from lazyparams.errors import TransformError
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import KillAfterLastUse, LazyTransformParams
from tests.transform.harness import (
    FUNC,
    assert_well_formed,
    check_kills,
    check_pass,
    is_kill,
    same_bits,
)


def test_intermediates_are_freed_and_params_and_results_kept() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((3, 2), "float16"):
            with R.dataflow():
                lv = R.permute_dims(x, axes=[1, 0])
                lv1 = R.astype(lv, "float16")
                unused = R.multiply(lv1, lv1)
                gv = R.add(lv1, lv1)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((3, 2), "float16"):
            lv = R.permute_dims(x, axes=[1, 0])
            lv1 = R.astype(lv, "float16")
            k0 = R.vm.kill_object(lv)
            unused = R.multiply(lv1, lv1)
            k1 = R.vm.kill_object(unused)
            gv = R.add(lv1, lv1)
            k2 = R.vm.kill_object(lv1)
            return gv

    after = check_pass(KillAfterLastUse(), Before, Expected)
    check_kills(after["main"])
    x = np.arange(6, dtype="float32").reshape(2, 3)
    assert same_bits(VirtualMachine(after)["main"](x), VirtualMachine(Before)["main"](x))


def test_aliases_keep_their_storage_alive_until_the_last_of_them() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((4,), "float32"):
            a = R.add(x, x)
            b = R.multiply(x, x)
            t = (a, b)
            first = t[0]
            c = R.concat(t, axis=0)
            d = R.add(first, first)
            e = R.concat((c, d), axis=0)
            f = R.strided_slice(e, axes=[0], begin=[0], end=[4])
            return f

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((4,), "float32"):
            a = R.add(x, x)
            b = R.multiply(x, x)
            t = (a, b)
            first = t[0]
            c = R.concat(t, axis=0)
            k0 = R.vm.kill_object(b)
            d = R.add(first, first)
            k1 = R.vm.kill_object(a)
            k2 = R.vm.kill_object(t)
            k3 = R.vm.kill_object(first)
            e = R.concat((c, d), axis=0)
            k4 = R.vm.kill_object(c)
            k5 = R.vm.kill_object(d)
            f = R.strided_slice(e, axes=[0], begin=[0], end=[4])
            k6 = R.vm.kill_object(e)
            return f

    after = check_pass(KillAfterLastUse(), Before, Expected)
    check_kills(after["main"])
    x = np.array([1.0, 2.0], "float32")
    assert same_bits(VirtualMachine(after)["main"](x), VirtualMachine(Before)["main"](x))


def test_values_in_the_returned_tuple_are_not_freed() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2,), "float32")):
            a = R.add(x, x)
            b = R.multiply(a, a)
            gv = (a, b)
            return gv

    assert KillAfterLastUse()(Before)["main"] is Before["main"]


def test_handed_off_values_and_receipts_are_not_freed_but_loads_are() -> None:
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main() -> R.Tuple:
            w = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            t = R.call_packed("kernel", w, sinfo_args=(R.Tensor((2,), "float32"),))
            u = R.add(t, t)
            s = R.call_packed("set_item", R.prim_value(0), u, sinfo_args=(R.Object,))
            s2 = R.call_packed("set_item", R.prim_value(1), u, sinfo_args=(R.Object,))
            return R.tuple()

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main() -> R.Tuple:
            w = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            t = R.call_packed("kernel", w, sinfo_args=(R.Tensor((2,), "float32"),))
            k0 = R.vm.kill_object(w)
            u = R.add(t, t)
            s = R.call_packed("set_item", R.prim_value(0), u, sinfo_args=(R.Object,))
            s2 = R.call_packed("set_item", R.prim_value(1), u, sinfo_args=(R.Object,))
            k1 = R.vm.kill_object(t)
            return R.tuple()

    after = check_pass(KillAfterLastUse(), Before, Expected)
    check_kills(after["main"])


def test_the_handoff_names_are_configurable() -> None:
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main(x: R.Tensor((2,), "float32")) -> R.Tuple:
            u = R.add(x, x)
            s = R.call_packed("save", R.prim_value(0), u, sinfo_args=(R.Object,))
            return R.tuple()

    freed = KillAfterLastUse()(Before)
    assert_well_formed(freed)
    assert is_kill(freed["main"].bindings()[-1])
    kept = KillAfterLastUse(handoff=["save"])(Before)["main"]
    assert kept is Before["main"]
    with pytest.raises(TransformError, match="expected handoff to be a list of callee names"):
        KillAfterLastUse(handoff="save")


def test_seed_output_gains_no_second_kill() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(params: R.Tuple(R.Tensor((2,), "float32"))):
            with R.dataflow():
                lv: R.Tensor((2,), "float32") = params[0]
                lv1 = R.add(lv, lv)
                gv = (lv1, lv)
                R.output(gv)
            return gv

    lazy = LazyTransformParams()(Before)
    assert KillAfterLastUse()(lazy)[FUNC] is lazy[FUNC]
