"""The seed's modules on the VM: Before eagerly, its lazy form with Python get_item/set_item.

Before and Expected are the seed test's modules (`tests/script/seed_modules.py`); Expected is
what `LazyTransformParams` must produce, so running it checks the lazy semantics even apart from
the pass, and running the pass's own output checks the pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyparams.ir import IRModule
from lazyparams.runtime import VirtualMachine
from lazyparams.transform import LazyTransformParams
from tests.script.seed_modules import Before, Expected

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
