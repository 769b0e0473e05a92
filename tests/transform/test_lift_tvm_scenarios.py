"""The rest of TVM's LiftTransformParams scenarios as Before/Expected tests: symbolic vars from a
runtime shape, a weight shape or a product of dims, and shared transforms over bindings in
different orders or with nothing in common; then, for every scenario module, the VM check that
`main(x, *main_transform_params(w))` equals `main(x, *w)`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.ir import (
    Function,
    IRModule,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
)
from lazyparams.ir.prim import IntImm, PrimExpr, PrimVar
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LiftTransformParams
from tests.transform.harness import check_pass, same_bits
from tests.transform.lift_scenarios import SCENARIOS
from tests.transform.lift_scenarios_shared import SHARED_SCENARIOS
from tests.transform.test_lift_shared_transform import check_shared

LIFT = LiftTransformParams()
SHARED = LiftTransformParams(shared_transform=True)
SIZES = {"n": 3, "m": 2, "batch_size": 3, "lora_rank": 2, "slice_index": 5}


def test_symbolic_var_1_a_runtime_shape_alone_lifts_nothing() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(params: R.Tuple) -> R.Tuple:
            R.func_attr({"num_input": 0})
            return R.tuple()

        @R.function
        def main(shape: R.Shape(["n"])) -> R.Shape(["n"]):
            R.func_attr({"num_input": 1})
            n = T.int64()
            with R.dataflow():
                zeros = R.zeros((n, n), "float32")
                R.output()
            return shape

    check_pass(LIFT, SCENARIOS["runtime_shape"], Expected)


def test_symbolic_var_2_a_prim_func_of_runtime_shape_stays() -> None:
    @I.ir_module
    class Expected:
        @T.prim_func
        def zeros(var_out: T.handle):
            n = T.int64()
            out = T.match_buffer(var_out, (n, n), "float32")
            for i, j in T.grid(n, n):
                with T.block("fill"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    T.reads()
                    T.writes(out[vi, vj])
                    out[vi, vj] = T.float32(0)

        @R.function
        def main_transform_params(params: R.Tuple) -> R.Tuple:
            R.func_attr({"num_input": 0})
            return R.tuple()

        @R.function
        def main(shape: R.Shape(["n"])) -> R.Shape(["n"]):
            R.func_attr({"num_input": 1})
            n = T.int64()
            cls = Expected
            with R.dataflow():
                zeros = R.call_tir(cls.zeros, (), out_sinfo=R.Tensor((n, n), "float32"))
                R.output()
            return shape

    check_pass(LIFT, SCENARIOS["runtime_zeros"], Expected)


def test_symbolic_var_from_shape_is_returned_and_taken_as_a_shape() -> None:
    @I.ir_module
    class Expected:
        @T.prim_func(private=True)
        def slice(rows: T.Buffer((16, 16), "int32"), index: T.int64, row: T.Buffer((16,), "int32")):
            for j in range(16):
                with T.block("take"):
                    vj = T.axis.remap("S", [j])
                    row[vj] = rows[index, vj]

        @R.function
        def main(
            A: R.Tensor([16, 16], "int32"),
            vars_from_compile_time_params: R.Shape(["slice_index"]),
            B_slice: R.Tensor([16], "int32"),
        ) -> R.Tensor([16], "int32"):
            R.func_attr({"num_input": 1})
            slice_index = T.int64()
            cls = Expected
            with R.dataflow():
                A_slice = R.call_tir(
                    cls.slice, (A, R.prim_value(slice_index)), out_sinfo=R.Tensor([16], "int32")
                )
                A_scale = R.multiply(A_slice, B_slice)
                R.output(A_scale)
            return A_scale

        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor([16, 16], "int32"), R.Shape(["slice_index"])),
        ) -> R.Tuple(R.Shape(["slice_index"]), R.Tensor([16], "int32")):
            R.func_attr({"num_input": 0})
            slice_index = T.int64()
            cls = Expected
            with R.dataflow():
                B = params[0]
                B_slice = R.call_tir(
                    cls.slice, (B, R.prim_value(slice_index)), out_sinfo=R.Tensor([16], "int32")
                )
                output = (R.shape([slice_index]), B_slice)
                R.output(output)
            return output

    check_pass(LIFT, SCENARIOS["shape_weight"], Expected)


def test_symbolic_var_defined_in_params_but_used_in_weights_stays() -> None:
    """`m * n` uses the input's dims: nothing of the weight lifts, and the transform, where m
    and n are unknown, takes and returns it by its rank only."""

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor(dtype="float32", ndim=1)),
        ) -> R.Tuple(R.Tensor(dtype="float32", ndim=1)):
            R.func_attr({"num_input": 0})
            return params

        @R.function
        def main(
            x: R.Tensor(["m", "n"], "float32"), weight: R.Tensor(["m * n"], "float32")
        ) -> R.Tensor(["m", "n"], "float32"):
            m = T.int64()
            n = T.int64()
            R.func_attr({"num_input": 1})
            with R.dataflow():
                shifted = R.add(weight, R.const(1, "float32"))
                grid = R.reshape(shifted, [m, n])
                output = R.multiply(x, grid)
                R.output(output)
            return output

    check_pass(LIFT, SCENARIOS["product_dim"], Expected)


def test_share_transforms_with_different_binding_order() -> None:
    """The first function by name (func1 transposes w2 first) orders the shared outputs."""

    @I.ir_module
    class Expected:
        @R.function
        def transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            with R.dataflow():
                w2 = params[1]
                w2_t = R.permute_dims(w2)
                w1 = params[0]
                w1_t = R.permute_dims(w1)
                output = (w2_t, w1_t)
                R.output(output)
            return output

        @R.function
        def func1(
            x: R.Tensor((4, 4), "float32"),
            w2_t: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
                y2 = R.matmul(x, w2_t)
                out = R.add(y1, y2)
                R.output(out)
            return out

        @R.function
        def func2(
            x: R.Tensor((4, 4), "float32"),
            w2_t: R.Tensor((4, 4), "float32"),
            w1_t: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                y1 = R.matmul(x, w1_t)
                y2 = R.matmul(x, w2_t)
                out = R.multiply(y1, y2)
                R.output(out)
            return out

    before = SHARED_SCENARIOS["different_binding_order"][0]
    after = check_pass(SHARED, before, Expected)
    check_shared(before, after, ["func1", "func2"])


def test_share_transform_with_no_shared_preprocessing() -> None:
    """Each function transposes a different weight: nothing is common, so the shared transform
    passes the weights through and each function keeps its transpose (TVM's wanted form, which
    lifts both, is marked xfail in TVM; TVM 0.27 gives this one)."""

    @I.ir_module
    class Expected:
        @R.function
        def transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")):
            R.func_attr({"num_input": 0})
            return params

        @R.function
        def func1(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w2_t = R.permute_dims(w2)
                out = R.matmul(x, w2_t)
                R.output(out)
            return out

        @R.function
        def func2(
            x: R.Tensor((4, 4), "float32"),
            w1: R.Tensor((4, 4), "float32"),
            w2: R.Tensor((4, 4), "float32"),
        ) -> R.Tensor((4, 4), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                w1_t = R.permute_dims(w1)
                out = R.matmul(x, w1_t)
                R.output(out)
            return out

    before = SHARED_SCENARIOS["no_shared_preprocessing"][0]
    after = check_pass(SHARED, before, Expected)
    check_shared(before, after, ["func1", "func2"])


# The VM check of every scenario ---------------------------------------------------------------


def _dim(d: PrimExpr) -> int:
    if isinstance(d, IntImm):
        return d.value
    assert isinstance(d, PrimVar), f"a dim of a scenario input is {d}"
    return SIZES[d.name]


def _value(sinfo: StructInfo | None, rng: np.random.Generator) -> Any:
    """A random value of `sinfo`; a shape or a dim product takes its sizes from SIZES."""
    if isinstance(sinfo, ShapeStructInfo):
        return tuple(_dim(d) for d in sinfo.values or ())
    assert isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None
    shape = tuple(
        SIZES["m"] * SIZES["n"] if not isinstance(d, IntImm | PrimVar) else _dim(d)
        for d in sinfo.shape
    )
    return np.asarray(rng.standard_normal(shape) * 4).astype(sinfo.dtype)  # 0-d: an array


def _run_both(before: IRModule, after: IRModule, name: str, transform: str) -> None:
    func = before[name]
    assert isinstance(func, Function)
    rng = np.random.default_rng(3)
    first = int(func.attrs["num_input"])
    values = [_value(p.struct_info, rng) for p in func.params]
    expected = VirtualMachine(before)[name](*values)
    vm = VirtualMachine(after)
    transformed = vm[transform](tuple(values[first:]))
    assert same_bits(vm[name](*values[:first], *transformed), expected), name


@pytest.mark.parametrize("consume", [False, True])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_runs_alike_lifted_and_whole(scenario: str, consume: bool) -> None:
    before = SCENARIOS[scenario]
    after = LiftTransformParams(consume_params=consume)(before)
    _run_both(before, after, "main", "main_transform_params")


@pytest.mark.parametrize("scenario", sorted(SHARED_SCENARIOS))
def test_every_shared_scenario_runs_alike_lifted_and_whole(scenario: str) -> None:
    before, shared = SHARED_SCENARIOS[scenario]
    after = LiftTransformParams(shared_transform=shared, consume_params=True)(before)
    names = [
        n
        for n, f in before.relax_functions()
        if "num_input" in f.attrs and not n.endswith("transform_params")
    ]
    for name in names:
        if shared is False:
            _run_both(before, after, name, name + "_transform_params")
        elif shared is True or name in shared:
            _run_both(before, after, name, "transform_params")
