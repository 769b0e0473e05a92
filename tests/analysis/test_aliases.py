"""The memory model and the kill plan read one alias analysis, so they agree.

On random transform programs with tuple literals, tuple fields, copies, match_casts and If
bindings: every var the memory model's lazy prediction frees is killed by the lazy pipeline
right after the same binding, and (without an If, whose peak depends on the branch) the
predicted lazy peak is the VM's measured peak after the pipeline.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.analysis import estimate_peak_memory, liveness, weight_struct_info
from lazyparams.analysis.aliases import aliases
from lazyparams.analysis.memory import lazy_kill_points
from lazyparams.analysis.memory_model import is_kill
from lazyparams.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    ExternFunc,
    Function,
    If,
    IRModule,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
)
from lazyparams.runtime import VirtualMachine
from lazyparams.script import relax as R
from lazyparams.transform import (
    KillAfterLastUse,
    LazyTransformParams,
    Sequential,
    standard_pipeline,
)
from tests.programs import DIMS, FLOAT_DTYPES, SETTINGS, Draw, _Generator, _result, _Value
from tests.transform.harness import FUNC, compare_lazy, weights_of

BOOL = TensorStructInfo((), "bool")


@dataclass
class _AliasGenerator(_Generator):
    """The shared program generator, with values that alias others: tuple literals and their
    fields, copies, match_casts, and If bindings whose branches may return an outer value."""

    cond: Var | None = None

    def step(self) -> None:
        name = self.draw(st.sampled_from([*_ALIAS_STEPS, "op", "op"]))
        if name == "op":
            super().step()
        else:
            _ALIAS_STEPS[name](self)

    def tuple_and_field(self) -> None:
        parts = [self.operand() for _ in range(self.draw(st.integers(1, 3)))]
        values = [p for p in parts if p is not None]
        tup = self.bb.emit(Tuple(tuple(v.var for v in values)), "t")
        for index in sorted(self.draw(st.sets(st.integers(0, len(values) - 1), max_size=2))):
            value = values[index]
            self.emit(TupleGetItem(tup, index), value.shape, value.dtype, value.bound)

    def copy(self) -> None:
        x = self.operand()
        if x is not None:
            self.emit(x.var, x.shape, x.dtype, x.bound)

    def match_cast(self) -> None:
        x = self.operand()
        if x is not None:
            var = self.bb.match_cast(x.var, TensorStructInfo(x.shape, x.dtype), "m")
            self.pool.append(_Value(var, x.shape, x.dtype, x.bound))

    def if_else(self) -> None:
        x = self.operand()
        if self.cond is None or x is None:
            return
        y = self.operand(lambda v: v.shape == x.shape and v.dtype == x.dtype)
        assert y is not None
        sinfo = TensorStructInfo(x.shape, x.dtype)
        then = self._branch(x, op.add(x.var, x.var), sinfo)
        otherwise = self._branch(y, op.multiply(y.var, y.var), sinfo)
        var = self.bb.new_var("w_if", sinfo)
        self.bb.emit_binding(VarBinding(var, If(self.cond, then, otherwise)))
        self.pool.append(_Value(var, x.shape, x.dtype, 2 * x.bound * max(y.bound, 1.0)))

    def _branch(self, outer: _Value, call: Call, sinfo: TensorStructInfo) -> SeqExpr:
        """A branch computing `call`, returning it or the outer value it read."""
        inner = self.bb.new_var("b", sinfo)
        returned = inner if self.draw(st.booleans()) else outer.var
        return SeqExpr((BindingBlock((VarBinding(inner, call),)),), returned)


_ALIAS_STEPS = {
    "tuple": _AliasGenerator.tuple_and_field,
    "copy": _AliasGenerator.copy,
    "match_cast": _AliasGenerator.match_cast,
    "if": _AliasGenerator.if_else,
}


@st.composite
def alias_programs(draw: Draw, max_params: int = 3, max_steps: int = 8) -> IRModule:
    """Random transform programs over float weights (and, with an If, a bool condition last)."""
    shapes = st.tuples(st.sampled_from(DIMS[:4]), st.sampled_from(DIMS[:4]))
    sinfos = draw(
        st.lists(
            st.builds(TensorStructInfo, shapes, st.sampled_from(FLOAT_DTYPES)),
            min_size=1,
            max_size=max_params,
        )
    )
    with_if = draw(st.booleans())
    fields = (*sinfos, BOOL) if with_if else tuple(sinfos)
    bb = BlockBuilder()
    bb.names.reserve("params")
    params = Var("params", TupleStructInfo(fields))
    dataflow = not with_if and draw(st.booleans())
    with bb.dataflow() if dataflow else nullcontext():
        gen = _AliasGenerator(draw, bb, params, list(sinfos))
        if with_if:
            gen.cond = bb.emit(TupleGetItem(params, len(sinfos)), "cond")
        for _ in range(draw(st.integers(1, max_steps))):
            gen.step()
        result = _result(gen, draw, dataflow)
    return IRModule({FUNC: bb.finish_function((params,), result)})


def _has_if(func: Function) -> bool:
    return any(isinstance(b.value, If) for b in func.bindings())


def _model_frees(eager: Function) -> dict[str, str]:
    """Var -> the binding after which the memory model frees it (by name)."""
    names = [b.var.name_hint for b in eager.bindings()]
    return {var.name_hint: names[at] for var, at in lazy_kill_points(eager).items()}


def _pipeline_frees(lazy: Function, eager: Function) -> dict[str, str]:
    """Var -> the binding the pipeline's kill of it follows (hand-offs and kills skipped), for
    the vars of the eager function (a load the lazy form adds has no eager name)."""
    eager_names = {b.var.name_hint for b in eager.bindings()}
    found: dict[str, str] = {}
    after = ""
    for binding in lazy.bindings():
        value = binding.value
        if is_kill(value):
            assert isinstance(value, Call) and isinstance(value.args[0], Var)
            found[value.args[0].name_hint] = after
        elif not _is_handoff(value):
            after = binding.var.name_hint
    return {var: at for var, at in found.items() if var in eager_names}


def _is_handoff(value: object) -> bool:
    return (
        isinstance(value, Call)
        and isinstance(value.op, ExternFunc)
        and (value.op.global_symbol == "set_item")
    )


def _measured_peak(mod: IRModule, weights: Any) -> int:
    externs = {"get_item": lambda i: weights[i], "set_item": lambda i, v: None}
    vm = VirtualMachine(mod, externs)
    vm[FUNC]()
    return vm.stats.peak_bytes


@SETTINGS
@given(alias_programs())
def test_the_model_frees_what_the_pipeline_kills_where_it_kills_it(mod: IRModule) -> None:
    eager = mod[FUNC]
    assert isinstance(eager, Function)
    lazy = Sequential([LazyTransformParams(), KillAfterLastUse()])(mod)
    lazy_func = lazy[FUNC]
    assert isinstance(lazy_func, Function)
    assert _model_frees(eager) == _pipeline_frees(lazy_func, eager)
    compare_lazy(mod, lazy)
    if _has_if(eager):
        return
    weights = weights_of(mod)
    predicted = estimate_peak_memory(eager, as_lazy=True).peak_bytes
    assert predicted == _measured_peak(lazy, weights)
    scheduled = standard_pipeline()(mod)
    scheduled_func = scheduled[FUNC]
    assert isinstance(scheduled_func, Function)
    inputs = weight_struct_info(eager)
    assert estimate_peak_memory(scheduled_func, inputs=inputs).peak_bytes == _measured_peak(
        scheduled, weights
    )


# The analysis by hand ------------------------------------------------------------------------


@R.function
def fields_and_branches(
    x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")
) -> R.Tensor((4,), "float32"):
    a = R.add(x, x)
    b = R.add(y, y)
    t = (a, b)
    first = t[0]
    m = R.match_cast(first, R.Tensor((4,), "float32"))
    if c:
        d = R.add(m, m)
        r = d
    else:
        r = b
    return r


def test_a_field_holds_its_own_storage_and_an_if_either_branch_result() -> None:
    func = fields_and_branches
    found = aliases(func.params, liveness(func).bindings)
    by_name = {v.name_hint: v for v in found.roots}
    a, b, t = by_name["a"], by_name["b"], by_name["t"]

    def roots(name: str) -> set[str]:
        return {r.name_hint for r in found.of(by_name[name])}

    assert found.of(t) == {t, a, b}
    assert roots("first") == {"first", "a"}
    assert roots("m") == {"m", "first", "a"}
    assert roots("r") == {"r", "b"}  # `d` is the branch's own: it becomes the If's value
