"""The LazyTransformParams scenarios of TVM's tests, Before modules in the script syntax, run
through the checked form: the output passes `well_formed` as it is, is impure, checks every
typed load with a match_cast, sets each output once, and gives the original outputs on the VM
(the seed's own scenario has its Before/Expected pair in test_lazy_strict)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.analysis import well_formed
from lazyparams.ir import (
    Function,
    IRModule,
    MatchCast,
    ObjectStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    Var,
)
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams
from tests.transform.harness import Store, extern_calls, same_bits

FUNC = "main_transform_params"


@I.ir_module
class OutputWithUseSite:
    @T.prim_func
    def copy(x: T.Buffer((), "float32"), y: T.Buffer((), "float32")):
        with T.block("block"):
            T.reads(x[()])
            T.writes(y[()])
            y[()] = x[()]

    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((), dtype="float32")),
    ) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((), dtype="float32")):
        R.func_attr({"relax.force_pure": True})
        cls = OutputWithUseSite
        x: R.Tensor((), dtype="float32") = params[0]
        y = R.call_tir(cls.copy, (x,), out_sinfo=R.Tensor((), dtype="float32"))
        z = R.call_tir(cls.copy, (y,), out_sinfo=R.Tensor((), dtype="float32"))
        gv = (y, z)
        return gv


@I.ir_module
class SymbolicOutput:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((3, "ic", 3, 3), dtype="float32"), R.Tensor((16, 16, 3, 3), dtype="float32")
        ),
    ) -> R.Tuple(R.Tensor(("ic", 3, 3, 3), dtype="float32"), R.Tensor((16, 16, 3, 3), "float32")):
        param0 = params[0]
        param1 = params[1]
        transformed0 = R.permute_dims(param0, axes=[1, 0, 2, 3])
        transformed = (transformed0, param1)
        return transformed


@I.ir_module
class DuplicateOutputs:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor([16], dtype="int32"), R.Tensor([16], dtype="int32")),
    ):
        param0 = params[0]
        param1 = params[1]
        transformed0 = R.add(param0, R.const(1, "int32"))
        transformed1 = R.add(param1, R.const(2, "int32"))
        output = (transformed0, transformed1, transformed0)
        return output


@I.ir_module
class WithConstOutput:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((3,), dtype="float32")),
    ):
        lv = R.add(params[0], params[0])
        gv = (lv, R.const([1.0, 2.0], "float32"), R.prim_value(7))
        return gv


@I.ir_module
class ParamsWithoutTuple:
    @R.function
    def main_transform_params(A: R.Tensor([16, 16], "float32"), B: R.Tensor([16, 16], "float32")):
        C = R.multiply(A, R.const(2, "float32"))
        D = R.add(C, B)
        return (D, B)


@I.ir_module
class UntypedParam:
    @R.function
    def main_transform_params(A: R.Any):
        return (A,)


SCENARIOS = {
    "output_with_use_site": (OutputWithUseSite, {}),
    "output_with_symbolic_dim": (SymbolicOutput, {"ic": 5}),
    "duplicate_outputs": (DuplicateOutputs, {}),
    "const_output": (WithConstOutput, {}),
    "params_without_tuple": (ParamsWithoutTuple, {}),
    "untyped_param": (UntypedParam, {}),
}


def _weights(func: Function, sizes: dict[str, int]) -> tuple[Any, ...]:
    rng = np.random.default_rng(1)
    sinfos = [p.struct_info for p in func.params]
    if len(sinfos) == 1 and isinstance(sinfos[0], TupleStructInfo):
        sinfos = list(sinfos[0].fields)
    arrays = []
    for sinfo in sinfos:
        if isinstance(sinfo, ObjectStructInfo):
            arrays.append(np.arange(4, dtype="float32"))
            continue
        assert isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
        shape = tuple(d.value if isinstance(d, IntImm) else sizes[str(d.name)] for d in sinfo.shape)
        arrays.append(np.asarray(rng.random(shape) * 10).astype(sinfo.dtype))
    return tuple(arrays)


def _eager(mod: IRModule, weights: tuple[Any, ...]) -> Any:
    func = mod[FUNC]
    assert isinstance(func, Function)
    vm = VirtualMachine(mod)
    if len(func.params) == 1 and isinstance(func.params[0].struct_info, TupleStructInfo):
        return vm[FUNC](weights)
    return vm[FUNC](*weights)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("gets_only", [False, True])
def test_tvm_scenario_in_the_checked_form(scenario: str, gets_only: bool) -> None:
    before, sizes = SCENARIOS[scenario]
    lazy_pass = LazyTransformParams(fset_item=None if gets_only else "set_item", strict=True)
    after = lazy_pass(before)
    well_formed(after)
    func = after[FUNC]
    assert isinstance(func, Function) and not func.is_pure and not func.params
    for load in extern_calls(func, "get_item"):
        typed = load.var.struct_info
        assert isinstance(load, MatchCast) or isinstance(typed, ObjectStructInfo)
    weights = _weights(before[FUNC], sizes)  # type: ignore[arg-type]
    expected = _eager(before, weights)
    store = Store(weights)
    vm = VirtualMachine(after, {"get_item": store.get_item, "set_item": store.set_item})
    result = vm[FUNC]()
    assert same_bits(result if gets_only else store.output_tuple(), expected)
    assert sorted(store.loads) == list(range(len(weights)))


def test_an_extra_get_param_reaches_every_load() -> None:
    """TVM's extra_get_item_params: the extra param is passed to get_item before the index."""
    loader = Var("loader", R.Object)
    after = LazyTransformParams(extra_get_item_params=[loader], strict=True)(ParamsWithoutTuple)
    well_formed(after)
    weights = _weights(ParamsWithoutTuple[FUNC], {})  # type: ignore[arg-type]
    seen: list[Any] = []
    store = Store(weights)

    def get_item(source: Any, index: int) -> Any:
        seen.append(source)
        return store.get_item(index)

    vm = VirtualMachine(after, {"get_item": get_item, "set_item": store.set_item})
    vm[FUNC]("the source")
    assert seen == ["the source", "the source"]
    assert same_bits(store.output_tuple(), _eager(ParamsWithoutTuple, weights))
