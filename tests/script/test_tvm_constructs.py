"""TVM 0.27 constructs beyond the seed: prim struct info spelled `T.int64`, scalar PrimFunc
params, `T.handle` with `T.match_buffer`, symbolic vars as Relax values; TVM's own pass-test
modules read verbatim and run; with apache-tvm installed, TVM reads our print of them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import LazyParamsError, ParseError, RuntimeExecError
from lazyparams.ir import PrimStructInfo, PrimValue, assert_structural_equal
from lazyparams.ir.expr import Function
from lazyparams.ir.struct_info import FuncStructInfo, ObjectStructInfo
from lazyparams.runtime import VirtualMachine
from lazyparams.script import parse
from lazyparams.tir.nodes import PrimFunc
from lazyparams.transform import LazyTransformParams
from tests.script.tvm_modules import (
    LAZY_PARAM_SHAPE_SYMBOLIC,
    LAZY_SYMBOLIC_VARS,
    LIFT_SYMBOLIC_VAR_FROM_SHAPE,
)

CALLBACK_MODULE = """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(fget: R.Callable((T.int64, R.Any), R.Any, True), rank: T.int64):
        w = fget(R.prim_value(0), R.str("w"))
        return w
"""

HANDLE_KERNEL = """
@T.prim_func
def copy(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, 4), "float32")
    B = T.match_buffer(var_b, (n, 4))
    for i, j in T.grid(n, 4):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
"""

BUFFER_KERNEL = HANDLE_KERNEL.replace(
    "var_a: T.handle, var_b: T.handle",
    'A: T.Buffer((n, 4), "float32"), B: T.Buffer((n, 4), "float32")',
).replace(
    '    A = T.match_buffer(var_a, (n, 4), "float32")\n    B = T.match_buffer(var_b, (n, 4))\n', ""
)


def test_a_dtype_spells_prim_struct_info_in_callables_and_params() -> None:
    func = parse(CALLBACK_MODULE)["main"]
    assert isinstance(func, Function)
    fget, rank = func.params
    assert fget.struct_info == FuncStructInfo(
        (PrimStructInfo("int64"), ObjectStructInfo()), ObjectStructInfo(), True
    )
    # TVM 0.27: a prim param is a var of its own name that shapes may use (`R.Prim(value=rank)`)
    assert isinstance(rank.struct_info, PrimStructInfo) and rank.struct_info.dtype == "int64"
    assert getattr(rank.struct_info.value, "name", None) == "rank"
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(parse(CALLBACK_MODULE).script(flavor=flavor))["main"], func)


def test_a_handle_param_is_the_buffer_its_match_buffer_declares() -> None:
    by_handle = parse(HANDLE_KERNEL)["copy"]
    by_buffer = parse(BUFFER_KERNEL)["copy"]
    assert isinstance(by_handle, PrimFunc)
    assert [b.name for b in by_handle.buffers] == ["A", "B"]
    assert_structural_equal(by_handle, by_buffer, map_free_vars=True)


def test_tvm_symbolic_vars_module_reads_verbatim_and_slices_in_the_vm() -> None:
    mod = parse(LAZY_SYMBOLIC_VARS)
    kernel = mod["slice_buffer"]
    assert isinstance(kernel, PrimFunc) and len(kernel.buffers) == 2 == len(kernel.params) - 1
    weight = np.arange(256, dtype="float32").reshape(16, 16)
    (row,) = VirtualMachine(mod)["main_transform_params"]((weight, (3,)))
    np.testing.assert_array_equal(row, weight[3])
    for flavor in ("lazyparams", "tvm"):
        assert_structural_equal(parse(mod.script(flavor=flavor)), mod)


def test_a_symbolic_var_as_a_call_tir_operand_is_its_prim_value() -> None:
    mod = parse(LIFT_SYMBOLIC_VAR_FROM_SHAPE)
    main = mod["main"]
    assert isinstance(main, Function)
    operands = [b.value.args[1].fields[1] for b in main.body.blocks[0].bindings[:2]]  # type: ignore[attr-defined]
    assert all(isinstance(o, PrimValue) for o in operands)
    a = np.arange(256, dtype="int32").reshape(16, 16)
    b = a + 1
    got = VirtualMachine(mod)["main"](a, b, (5,))
    np.testing.assert_array_equal(got, a[5] * b[5])


def test_tvm_match_buffer_module_reads_verbatim_and_runs() -> None:
    mod = parse(LAZY_PARAM_SHAPE_SYMBOLIC)
    rng = np.random.default_rng(0)
    w1 = rng.random((3, 16, 3, 3), "float32")
    w2 = rng.random((16, 16, 3, 3), "float32")
    got = VirtualMachine(mod)["main_transform_params"]((w1, w2))
    np.testing.assert_array_equal(got[0], w2)
    np.testing.assert_array_equal(got[1], w1.transpose(1, 0, 2, 3))


def test_a_scalar_param_takes_an_int_only() -> None:
    mod = parse(LAZY_SYMBOLIC_VARS)
    kernel = VirtualMachine(mod)._prims["slice_buffer"]
    with pytest.raises(RuntimeExecError, match="scalar slice_index: expected an int"):
        kernel([np.zeros((16, 16), "float32"), 1.5, np.zeros(16, "float32")])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HANDLE_KERNEL.replace("    B = T.match_buffer(var_b, (n, 4))\n", ""),
            "parameter var_b: T.handle without a T.match_buffer",
        ),
        (
            HANDLE_KERNEL.replace("var_b, (n, 4))", "n, (n, 4))"),
            "T.match_buffer: expected a T.handle parameter, got n",
        ),
        (
            HANDLE_KERNEL.replace("var_b: T.handle", "var_b: T.handle, x: T.float32"),
            "parameter x: expected an integer scalar such as T.int64, got T.float32",
        ),
        (
            HANDLE_KERNEL.replace("var_b: T.handle", "var_b: T.handle, x: T.Tensor"),
            'parameter x: expected T.Buffer((3, 16), "float32"), T.handle or a scalar',
        ),
    ],
    ids=["unmatched-handle", "match-non-handle", "float-scalar", "bad-param"],
)
def test_bad_tir_params_are_parse_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match="<string>:") as err:
        parse(text)
    assert message in err.value.reason


def _lazy_outputs(mod: Any, weights: list[Any]) -> dict[int, Any]:
    outputs: dict[int, Any] = {}
    externs = {"get_item": lambda i: weights[int(i)], "set_item": outputs.__setitem__}
    VirtualMachine(mod, externs)["main_transform_params"]()
    return outputs


def _tvm_outputs(tvm: Any, mod: Any, weights: list[Any]) -> dict[int, Any]:
    from tvm import relax

    outputs: dict[int, Any] = {}
    tensor = tvm.runtime.tensor
    tvm.register_global_func("get_item", lambda i: tensor(weights[int(i)]), override=True)
    tvm.register_global_func(
        "set_item", lambda i, v: outputs.__setitem__(int(i), v.numpy()), override=True
    )
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    vm["main_transform_params"]()
    return outputs


def test_tvm_reads_our_print_of_the_match_buffer_module_and_computes_the_same() -> None:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    from tvm import relax
    from tvm.script import from_source

    ours = LazyTransformParams(strict=True)(parse(LAZY_PARAM_SHAPE_SYMBOLIC))
    theirs = from_source(ours.script(flavor="tvm"))  # checks well_formed itself
    relax.analysis.well_formed(theirs)  # raises on the first violation
    rng = np.random.default_rng(1)
    weights = [rng.random((3, 16, 3, 3), "float32"), rng.random((16, 16, 3, 3), "float32")]
    expected = _lazy_outputs(ours, weights)
    got = _tvm_outputs(tvm, theirs, weights)
    assert sorted(got) == sorted(expected) == [0, 1]
    for index, value in expected.items():
        np.testing.assert_array_equal(got[index], value)


TIR_VARS_MODULE = """
@I.ir_module
class Module:
    @T.prim_func
    def row(A: T.Buffer((4, 3), "float32"), B: T.Buffer((3,), "float32"), k: T.int64):
        for j in range(3):
            with T.block("row"):
                vj = T.axis.remap("S", [j])
                B[vj] = A[k, vj]

    @R.function
    def main(x: R.Tensor((4, 3), "float32"), s: R.Shape(["k"])):
        k = T.int64()
        cls = Module
        y = R.call_tir(cls.row, x, R.Tensor((3,), "float32"), tir_vars=R.shape([k]))
        return y
"""


def test_tir_vars_pass_ints_after_the_outputs() -> None:
    mod = parse(TIR_VARS_MODULE)
    x = np.arange(12, dtype="float32").reshape(4, 3)
    np.testing.assert_array_equal(VirtualMachine(mod)["main"](x, (2,)), x[2])
    text = mod.script()
    assert "tir_vars=R.shape([k])" in text and "(x,)" in text  # the lone operand is a tuple
    assert_structural_equal(parse(text), mod)


def test_tvm_spelling_refuses_tir_vars() -> None:
    with pytest.raises(LazyParamsError, match=r"tir_vars= in TVM 0\.27's spelling"):
        parse(TIR_VARS_MODULE).script(flavor="tvm")


def test_tir_vars_count_against_the_prim_func_params() -> None:
    text = TIR_VARS_MODULE.replace("R.shape([k])", "R.shape([k, k])")
    with pytest.raises(RuntimeExecError, match="got 1 inputs and 1 outputs and 2 tir_vars"):
        VirtualMachine(parse(text))


SLICE = """
@R.function
def f(x: R.Tensor((4,), "float32")):
    y = R.strided_slice(x, [0], [1], [9]{extra})
    return y
"""


def test_assume_inbound_is_read_and_the_slice_clamps_either_way() -> None:
    plain = parse(SLICE.format(extra=""))
    x = np.arange(4, dtype="float32")
    for flag in ("True", "False"):
        mod = parse(SLICE.format(extra=f", assume_inbound={flag}"))
        assert_structural_equal(mod, plain)
        np.testing.assert_array_equal(VirtualMachine(mod)["f"](x), x[1:])
    with pytest.raises(ParseError, match="assume_inbound: expected True or False, got 1"):
        parse(SLICE.format(extra=", assume_inbound=1"))


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            'y = R.call_pure_packed("f", x, sinfo_args=R.Object)',
            "R.call_pure_packed: expected one of the VM's pure builtins",
        ),
        (
            'y = R.memory.alloc_storage(R.shape([4]), 0, "global", "float32")',
            "R.memory.alloc_storage is not supported: explicit storage",
        ),
        ("y = R.assert_op()", "R.assert_op: expected a condition, got none"),
        (
            'y = metadata["ir.GenericConst"][0]',
            "metadata['ir.GenericConst'][0] refers to TVM's metadata section",
        ),
    ],
    ids=["call_pure_packed", "memory", "assert_op", "metadata"],
)
def test_tvm_constructs_without_meaning_here_are_named(statement: str, message: str) -> None:
    text = f'@R.function\ndef f(x: R.Tensor((3,), "float32")):\n    {statement}\n    return y\n'
    with pytest.raises(ParseError, match="<string>:3:9") as err:
        parse(text)
    assert message in err.value.reason


TYPEVAR_MODULE = """
# from typing import TypeVar
n = TypeVar("n")
@I.ir_module
class Module:
    @R.function
    def first(x: R.Tensor((n, 2), dtype="float32")) -> R.Tensor((n, 2), dtype="float32"):
        y: R.Tensor((n, 2), dtype="float32") = R.add(x, x)
        return y

    @R.function
    def second(x: R.Tensor((n,), dtype="float32")) -> R.Tensor((n,), dtype="float32"):
        return x
"""


def test_top_level_type_vars_declare_a_symbolic_var_in_every_function() -> None:
    """TVM 0.27 prints symbolic vars once at the top of the text, as `n = TypeVar("n")`."""
    mod = parse(TYPEVAR_MODULE)
    first, second = mod["first"], mod["second"]
    assert isinstance(first, Function) and isinstance(second, Function)
    dim_first = first.params[0].struct_info.shape[0]  # type: ignore[union-attr]
    dim_second = second.params[0].struct_info.shape[0]  # type: ignore[union-attr]
    assert dim_first.name == dim_second.name == "n"
    assert dim_first is not dim_second, "each function binds its own symbolic var"
    got = VirtualMachine(mod)["first"](np.ones((3, 2), "float32"))
    assert np.array_equal(got, np.full((3, 2), 2, "float32"))
