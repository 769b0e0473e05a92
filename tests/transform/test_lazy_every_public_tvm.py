"""The callback convention on every public function, as TVM 0.27's `LazyGetInput` and
`LazySetOutput` apply it: `every_public=True` rewrites each public function (a private one is
left alone) whatever its name and whether it declares `num_input`. TVM's own print of its
result reads here and runs on the VM (its `fset_output` is typed to return `R.Tuple()`, which
a Python callback's None stands for); with apache-tvm installed, TVM reads our result and its
VM computes what ours does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import RuntimeExecError
from lazyparams.ir import Call, Function, IRModule, PrimValue, StringImm, Var
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import relax as R
from lazyparams.transform import LazyGetInput, LazySetOutput, Sequential
from tests.transform.harness import Store, check_pass, run_eager, same_bits

EVERY_PUBLIC = Sequential([LazyGetInput(every_public=True), LazySetOutput(every_public=True)])

BEFORE = """
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((4,), "float32"), B: R.Tensor((4,), "float32")):
        R.func_attr({"num_input": 1})
        c = R.add(A, B)
        return (c, B)

    @R.function
    def second(A: R.Tensor((4,), "float32"), B: R.Tensor((4,), "float32")):
        c = R.multiply(A, B)
        return c

    @R.function(private=True)
    def hidden(A: R.Tensor((4,), "float32")):
        return A
"""

AS_TVM_PRINTS_IT = """
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(private=True)
    def hidden(A: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        return A

    @R.function(pure=False)
    def second(fget_param: R.Callable((T.int64, R.Any), R.Any, True), fset_output: R.Callable((T.int64, R.Any), R.Tuple, False)) -> R.Tuple:
        R.func_attr({"num_input": 2})
        A_untyped: R.Any = fget_param(0, R.str("A"))
        A: R.Tensor((4,), dtype="float32") = R.match_cast(A_untyped, R.Tensor((4,), dtype="float32"))
        B_untyped: R.Any = fget_param(1, R.str("B"))
        B: R.Tensor((4,), dtype="float32") = R.match_cast(B_untyped, R.Tensor((4,), dtype="float32"))
        c: R.Tensor((4,), dtype="float32") = R.multiply(A, B)
        fset_output(0, c)
        return R.tuple()

    @R.function(pure=False)
    def main(A: R.Tensor((4,), dtype="float32"), fget_param: R.Callable((T.int64, R.Any), R.Any, True), fset_output: R.Callable((T.int64, R.Any), R.Tuple, False)) -> R.Tuple:
        R.func_attr({"num_input": 3})
        B_untyped: R.Any = fget_param(0, R.str("B"))
        B: R.Tensor((4,), dtype="float32") = R.match_cast(B_untyped, R.Tensor((4,), dtype="float32"))
        fset_output(1, B)
        c: R.Tensor((4,), dtype="float32") = R.add(A, B)
        fset_output(0, c)
        return R.tuple()
"""
"""TVM 0.27's print of `LazySetOutput()(LazyGetInput()(BEFORE))`, verbatim (checked below
where TVM is installed)."""


def _expected() -> IRModule:
    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main(
            A: R.Tensor((4,), "float32"),
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            R.func_attr({"num_input": 3})
            B = R.match_cast(fget_param(R.prim_value(0), R.str("B")), R.Tensor((4,), "float32"))
            _ = fset_output(R.prim_value(1), B)
            c = R.add(A, B)
            _1 = fset_output(R.prim_value(0), c)
            return R.tuple()

        @R.function(pure=False)
        def second(
            fget_param: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
            fset_output: R.Callable([R.Prim("int64"), R.Object], R.Object, purity=False),
        ) -> R.Tuple:
            R.func_attr({"num_input": 2})
            A = R.match_cast(fget_param(R.prim_value(0), R.str("A")), R.Tensor((4,), "float32"))
            B = R.match_cast(fget_param(R.prim_value(1), R.str("B")), R.Tensor((4,), "float32"))
            c = R.multiply(A, B)
            _ = fset_output(R.prim_value(0), c)
            return R.tuple()

        @R.function(private=True)
        def hidden(A: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            return A

    return Expected


WEIGHTS = (np.arange(4, dtype="float32"), np.arange(4, dtype="float32") + 10)


def _run_ours(mod: IRModule, name: str) -> tuple[Store, Any]:
    """Run public function `name` of a callback-style module on WEIGHTS (main's A at runtime)."""
    runtime = WEIGHTS[:1] if name == "main" else ()
    store = Store(WEIGHTS[len(runtime) :])
    result = VirtualMachine(mod)[name](*runtime, store.get_item, store.set_item)
    return store, result


def _eager(name: str) -> tuple[Any, ...]:
    result = run_eager(parse(BEFORE), WEIGHTS, name=name)
    return result if isinstance(result, tuple) else (result,)


def test_every_public_function_takes_the_callbacks_as_tvm_places_them() -> None:
    before = parse(BEFORE)
    after = check_pass(EVERY_PUBLIC, before, _expected())
    assert after["hidden"] is before["hidden"]
    for name in ("main", "second"):
        store, result = _run_ours(after, name)
        assert result == ()
        assert same_bits(store.output_tuple(), _eager(name))


def _callback_calls(func: Function) -> list[tuple[str, Any]]:
    """The function's callback calls in order: callee, then index and name or value var."""
    calls = []
    for binding in func.bindings():
        call = binding.value
        if isinstance(call, Call) and isinstance(call.op, Var):
            index, what = call.args
            assert isinstance(index, PrimValue)
            label = what.value if isinstance(what, StringImm) else getattr(what, "name_hint", "")
            calls.append((call.op.name_hint, (index.value, label)))
    return calls


def test_tvm_s_print_has_our_convention_and_runs_on_the_vm() -> None:
    theirs, ours = parse(AS_TVM_PRINTS_IT), EVERY_PUBLIC(parse(BEFORE))
    assert sorted(theirs.names()) == sorted(ours.names())
    for name in ("main", "second"):
        t_func, o_func = theirs[name], ours[name]
        assert isinstance(t_func, Function) and isinstance(o_func, Function)
        assert [p.name_hint for p in t_func.params] == [p.name_hint for p in o_func.params]
        assert t_func.attrs == o_func.attrs
        assert _callback_calls(t_func) == _callback_calls(o_func)
        store, result = _run_ours(theirs, name)  # fset_output's None stands for R.tuple()
        assert result == ()
        assert same_bits(store.output_tuple(), _eager(name))


def test_a_callback_returning_nothing_where_another_type_is_declared_is_refused() -> None:
    text = AS_TVM_PRINTS_IT.replace("R.Tuple, False)", "R.Tensor, False)")
    text = text.replace("fset_output(0, c)", "_ = fset_output(0, c)\n        R.vm.kill_object(_)")
    with pytest.raises(
        RuntimeExecError, match=r"binding 5 \(_\): declared type: expected R.Tensor.*, got NoneType"
    ):
        _run_ours(parse(text), "second")


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    return tvm


def test_tvm_prints_its_result_as_the_text_above() -> None:
    _tvm()
    from tvm import relax
    from tvm.script import from_source

    lazy_inputs = relax.transform.LazyGetInput()(from_source(BEFORE))
    theirs = relax.transform.LazySetOutput()(lazy_inputs)
    assert theirs.script().split() == AS_TVM_PRINTS_IT.split()


def _run_tvm(tvm: Any, mod: Any, name: str) -> tuple[Any, ...]:
    from tvm import relax

    runtime = WEIGHTS[:1] if name == "main" else ()
    weights = WEIGHTS[len(runtime) :]
    outputs: dict[int, Any] = {}

    def fget(index: Any, _name: Any) -> Any:
        return tvm.runtime.tensor(weights[int(index)])

    def fset(index: Any, value: Any) -> None:
        outputs[int(index)] = value.numpy()

    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    vm[name](*(tvm.runtime.tensor(a) for a in runtime), fget, fset)
    return tuple(outputs[i] for i in range(len(outputs)))


def test_tvm_reads_our_result_and_computes_the_same() -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    theirs = from_source(EVERY_PUBLIC(parse(BEFORE)).script(flavor="tvm"))
    relax.analysis.well_formed(theirs)
    for name in ("main", "second"):
        assert same_bits(_run_tvm(tvm, theirs, name), _eager(name))
