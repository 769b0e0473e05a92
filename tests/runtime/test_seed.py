"""The seed's modules on the VM: Before eagerly, its lazy form with Python get_item/set_item.

Before and Expected are copied from the seed's test in the script syntax; Expected is what
`LazyTransformParams` must produce, so running it checks the lazy semantics even apart from the
pass, and running the pass's own output checks the pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyparams.ir import IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams


@I.ir_module
class Before:
    @T.prim_func
    def transform_layout_IOHW_to_OIHW(
        w1: T.Buffer((3, 16, 3, 3), "float32"), out: T.Buffer((16, 3, 3, 3), "float32")
    ):
        for ax0, ax1, ax2, ax3 in T.grid(16, 3, 3, 3):
            with T.block("layout_transform"):
                o, i, h, w = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                T.reads(w1[i, o, h, w])
                T.writes(out[o, i, h, w])
                out[o, i, h, w] = w1[i, o, h, w]

    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((3, 16, 3, 3), dtype="float32"), R.Tensor((16, 16, 3, 3), dtype="float32")
        ),
    ) -> R.Tuple(
        R.Tensor((16, 16, 3, 3), dtype="float32"), R.Tensor((16, 3, 3, 3), dtype="float32")
    ):
        cls = Before
        with R.dataflow():
            lv: R.Tensor((16, 16, 3, 3), dtype="float32") = params[1]
            lv1: R.Tensor((3, 16, 3, 3), dtype="float32") = params[0]
            lv2 = R.call_tir(
                cls.transform_layout_IOHW_to_OIHW,
                (lv1,),
                out_sinfo=R.Tensor((16, 3, 3, 3), dtype="float32"),
            )
            gv: R.Tuple(
                R.Tensor((16, 16, 3, 3), dtype="float32"),
                R.Tensor((16, 3, 3, 3), dtype="float32"),
            ) = (lv, lv2)
            R.output(gv)
        return gv


@I.ir_module
class Expected:
    @T.prim_func
    def transform_layout_IOHW_to_OIHW(
        w1: T.Buffer((3, 16, 3, 3), "float32"), out: T.Buffer((16, 3, 3, 3), "float32")
    ):
        for ax0, ax1, ax2, ax3 in T.grid(16, 3, 3, 3):
            with T.block("layout_transform"):
                o, i, h, w = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
                T.reads(w1[i, o, h, w])
                T.writes(out[o, i, h, w])
                out[o, i, h, w] = w1[i, o, h, w]

    @R.function
    def main_transform_params() -> R.Tuple(R.Object, R.Object):
        cls = Expected
        with R.dataflow():
            lv: R.Object = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
            lv1: R.Object = R.call_packed("set_item", R.prim_value(0), lv, sinfo_args=(R.Object,))
            lv2: R.Tuple = R.vm.kill_object(lv)
            lv1_1: R.Object = R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,))
            lv3 = R.call_tir(
                cls.transform_layout_IOHW_to_OIHW,
                (lv1_1,),
                out_sinfo=R.Tensor((16, 3, 3, 3), dtype="float32"),
            )
            lv4: R.Object = R.call_packed("set_item", R.prim_value(1), lv3, sinfo_args=(R.Object,))
            lv5: R.Tuple = R.vm.kill_object(lv1_1)
            gv: R.Tuple(R.Object, R.Object) = (lv1, lv4)
            R.output(gv)
        return gv


FUNC = "main_transform_params"


def _weights(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((3, 16, 3, 3)).astype(np.float32),
        rng.standard_normal((16, 16, 3, 3)).astype(np.float32),
    )


def _run_lazy(mod: IRModule, weights: tuple[np.ndarray, ...]) -> tuple[dict[int, Any], list[Any]]:
    """Run the lazy function with Python callbacks; outputs by index, and the call log."""
    outputs: dict[int, Any] = {}
    log: list[Any] = []

    def get_item(i: int) -> np.ndarray:
        log.append(("get", i))
        return weights[i].copy()  # a fresh array, as a loader from disk would give

    def set_item(i: int, value: np.ndarray) -> None:
        log.append(("set", i))
        assert i not in outputs, f"output {i} set twice"
        outputs[i] = value

    vm = VirtualMachine(mod, externs={"get_item": get_item, "set_item": set_item})
    result = vm[FUNC]()
    assert result == (None, None)  # the callbacks' results, collected in the output tuple
    return outputs, log


def test_before_runs_eagerly_and_lays_out_with_tir() -> None:
    w0, w1 = _weights(0)
    out = VirtualMachine(Before)[FUNC]((w0, w1))
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_array_equal(out[0], w1)
    np.testing.assert_array_equal(out[1], np.transpose(w0, (1, 0, 2, 3)))


def test_expected_lazy_form_gives_identical_outputs() -> None:
    weights = _weights(1)
    eager = VirtualMachine(Before)[FUNC](weights)
    lazy, log = _run_lazy(Expected, weights)
    assert log == [("get", 1), ("set", 0), ("get", 0), ("set", 1)]
    for i, want in enumerate(eager):
        assert lazy[i].dtype == want.dtype
        np.testing.assert_array_equal(lazy[i], want)


def test_the_pass_output_runs_like_the_eager_function() -> None:
    weights = _weights(2)
    eager = VirtualMachine(Before)[FUNC](weights)
    lazy, _ = _run_lazy(LazyTransformParams()(Before), weights)
    assert sorted(lazy) == [0, 1]
    for i, want in enumerate(eager):
        np.testing.assert_array_equal(lazy[i], want)
