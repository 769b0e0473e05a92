"""Fixtures for the frontend tests: run a traced module eagerly and lazily, compare bits."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from lazyparams.analysis.well_formed import well_formed
from lazyparams.frontend import trace
from lazyparams.ir import IRModule

Arrays = dict[str, np.ndarray]


def _vm(mod: IRModule) -> Any:
    """A VM of `mod`: it registers the module's traced numpy kernels itself."""
    from lazyparams.runtime import VirtualMachine

    return VirtualMachine(mod)


def run_eager(mod: IRModule, arrays: Mapping[str, np.ndarray]) -> Arrays:
    """Run `transform_params` on every input at once; outputs by name."""
    func = mod["transform_params"]
    args = tuple(arrays[name] for name in func.attrs["input_names"])
    outputs = _vm(mod)["transform_params"](args)
    return dict(zip(func.attrs["output_names"], outputs, strict=True))


def run_lazy(mod: IRModule, arrays: Mapping[str, np.ndarray]) -> Arrays:
    """Run the LazyTransformParams form with Python get_item/set_item; outputs by name."""
    from lazyparams.transform import LazyTransformParams

    func = mod["transform_params"]
    inputs, outputs = func.attrs["input_names"], func.attrs["output_names"]
    got: dict[int, np.ndarray] = {}

    def set_item(index: int, value: np.ndarray) -> None:
        assert index not in got, f"output {outputs[index]} set twice"
        got[index] = value

    lazy_mod = LazyTransformParams()(mod)
    well_formed(lazy_mod)
    vm = _vm(lazy_mod)
    vm.register("get_item", lambda index: arrays[inputs[index]])
    vm.register("set_item", set_item)
    vm["transform_params"]()
    assert sorted(got) == list(range(len(outputs)))
    return {outputs[i]: got[i] for i in sorted(got)}


def assert_bits_equal(actual: Any, expected: Any, name: str = "") -> None:
    """Same dtype, same shape, same bytes: NaNs and signed zeros included."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{name}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{name}: shape {actual.shape} != {expected.shape}"
    same = np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes()
    assert same, f"{name}: values differ\n{actual}\n!=\n{expected}"


def check_against_numpy(
    fn: Callable[[Any], Mapping[str, Any]],
    arrays: Mapping[str, np.ndarray],
    oracle: Callable[[Any], Mapping[str, Any]] | None = None,
    *,
    lazy: bool = True,
) -> IRModule:
    """Trace `fn` (checking the module is well formed), run it eagerly (and lazily), and compare
    with `oracle(arrays)` bit for bit.

    Without an oracle, `fn` itself runs on the numpy arrays: the traced API is numpy's.
    """
    originals = {name: a.copy() for name, a in arrays.items()}
    mod = trace(fn, {name: (a.shape, a.dtype) for name, a in arrays.items()})
    well_formed(mod)
    # Division by the zeros in the data is meant: numpy and the VM both give inf, silently.
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = (oracle or fn)(dict(originals))
        runs = [run_eager(mod, arrays)] + ([run_lazy(mod, arrays)] if lazy else [])
    for got in runs:
        assert list(got) == list(expected)
        for name, value in expected.items():
            assert_bits_equal(got[name], value, name)
    for name, a in arrays.items():
        assert_bits_equal(a, originals[name], f"input {name} (must not be modified)")
    return mod


# Session-scoped: it is stateless, and hypothesis tests may then use it.


@pytest.fixture(scope="session")
def check() -> Callable[..., IRModule]:
    return check_against_numpy
