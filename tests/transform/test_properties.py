"""Properties of the passes on random transform programs (random DAGs of ops over a tuple of
random weights; outputs with duplicates, pass-throughs, constants and prims).

After each pass the module is well formed and prints and parses back; in the lazy form each
output index is set exactly once, each weight loaded once and killed exactly once, nothing is
used after its kill; and the VM gives the original outputs bit for bit.
"""

from __future__ import annotations

from hypothesis import given

from lazyparams.analysis import well_formed
from lazyparams.ir import Call, Function, IRModule, PrimValue
from lazyparams.ir.prim import IntImm
from lazyparams.runtime import VirtualMachine
from lazyparams.transform import (
    DeadCodeElimination,
    KillAfterLastUse,
    LazyGetInput,
    LazySetOutput,
    LazyTransformParams,
    Pass,
    Sequential,
    ToNonDataflow,
)
from tests.programs import SETTINGS, transform_programs
from tests.transform.harness import (
    FUNC,
    Store,
    assert_round_trip,
    assert_well_formed,
    check_kills,
    compare_lazy,
    extern_calls,
    run_eager,
    same_bits,
    weights_of,
)


def _indices(func: Function, extern: str) -> list[int]:
    """The index operand of every call of `extern` (after any extra operands)."""
    indices = []
    for binding in extern_calls(func, extern):
        call = binding.value
        assert isinstance(call, Call)
        position = -1 if extern == "get_item" else -2
        index = call.args[position]
        assert isinstance(index, PrimValue) and isinstance(index.value, IntImm)
        indices.append(index.value.value)
    return indices


def _apply(pass_: Pass, mod: IRModule) -> IRModule:
    """Run a pass, checking it leaves its input alone and its output round-trips."""
    text = mod.script()
    after = pass_(mod)
    assert mod.script() == text
    assert_well_formed(after)
    assert_round_trip(after)
    return after


def _outputs(mod: IRModule) -> int:
    ret = mod[FUNC].ret_struct_info
    return len(ret.fields)  # type: ignore[attr-defined]


@SETTINGS
@given(transform_programs())
def test_lazy_transform_params_sets_once_loads_once_and_frees_every_load(mod: IRModule) -> None:
    after = _apply(LazyTransformParams(), mod)
    func = after[FUNC]
    assert isinstance(func, Function)
    assert sorted(_indices(func, "set_item")) == list(range(_outputs(mod)))
    loads = _indices(func, "get_item")
    assert len(loads) == len(set(loads))
    load_vars = {b.var for b in extern_calls(func, "get_item")}
    check_kills(func, lambda v: v in load_vars)
    store = compare_lazy(mod, after)
    assert sorted(store.loads) == sorted(loads)


@SETTINGS
@given(transform_programs())
def test_get_only_mode_returns_the_original_outputs(mod: IRModule) -> None:
    after = _apply(LazyTransformParams(fset_item=None), mod)
    func = after[FUNC]
    assert isinstance(func, Function)
    assert func.ret_struct_info == mod[FUNC].ret_struct_info
    check_kills(func)
    compare_lazy(mod, after, returns=True)


@SETTINGS
@given(transform_programs())
def test_callback_pipeline_hands_off_the_original_outputs(mod: IRModule) -> None:
    pipeline = Sequential([LazyGetInput(), LazySetOutput(), KillAfterLastUse()])
    after = _apply(pipeline, mod)
    well_formed(after)
    check_kills(after[FUNC])
    weights = weights_of(mod)
    store = Store(weights)
    assert VirtualMachine(after)[FUNC](store.get_item, store.set_item) == ()
    assert same_bits(store.output_tuple(), run_eager(mod, weights))


@SETTINGS
@given(transform_programs())
def test_cleanup_passes_keep_every_output_bit(mod: IRModule) -> None:
    weights = weights_of(mod)
    expected = run_eager(mod, weights)
    for pass_ in (KillAfterLastUse(), ToNonDataflow(), DeadCodeElimination()):
        after = _apply(pass_, mod)
        well_formed(after)
        check_kills(after[FUNC])
        assert same_bits(run_eager(after, weights), expected)


@SETTINGS
@given(transform_programs())
def test_freeing_everything_after_the_lazy_rewrite_keeps_outputs(mod: IRModule) -> None:
    after = _apply(Sequential([LazyTransformParams(), KillAfterLastUse()]), mod)
    check_kills(after[FUNC])
    compare_lazy(mod, after)
