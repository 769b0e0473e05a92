"""TVM's LazyTransformParams scenarios, both ways through TVM 0.27 (the `tvm` extra): our
checked lazy output printed in TVM's flavour is read by TVM's parser, passes its `well_formed`,
and TVM's VM run of it hands off the values our VM hands off, bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.runtime import VirtualMachine
from lazyparams.transform import LazyTransformParams
from tests.transform.harness import Store
from tests.transform.test_lazy_tvm_scenarios import FUNC, SCENARIOS, _weights


def _tvm_run(tvm: Any, text: str, weights: tuple[Any, ...]) -> dict[int, Any]:
    """TVM parses `text`, checks it, compiles it for the CPU and runs the lazy function."""
    from tvm import relax
    from tvm.script import from_source

    mod = from_source(text)  # checks well_formed itself
    relax.analysis.well_formed(mod)  # raises on the first violation
    outputs: dict[int, Any] = {}
    tensor = tvm.runtime.tensor
    tvm.register_global_func("get_item", lambda i: tensor(weights[int(i)]), override=True)

    def set_item(index: Any, value: Any) -> None:  # copied at once: TVM may reuse the storage
        outputs[int(index)] = value.numpy() if hasattr(value, "numpy") else value

    tvm.register_global_func("set_item", set_item, override=True)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    vm[FUNC]()
    return outputs


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_tvm_reads_and_runs_our_lazy_output(scenario: str) -> None:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    before, sizes = SCENARIOS[scenario]
    ours = LazyTransformParams(strict=True)(before)
    weights = _weights(before[FUNC], sizes)  # type: ignore[arg-type]
    store = Store(weights)
    VirtualMachine(ours, {"get_item": store.get_item, "set_item": store.set_item})[FUNC]()
    got = _tvm_run(tvm, ours.script(flavor="tvm"), weights)
    assert sorted(got) == sorted(store.outputs)
    for index, value in store.outputs.items():
        if isinstance(value, np.ndarray):
            theirs = got[index]
            assert theirs.dtype == value.dtype
            np.testing.assert_array_equal(theirs, value)
        else:  # a prim output: TVM hands off the int itself
            assert got[index] == value
