"""ScheduleForMemory: a valid order with the lowest lazy peak, loads right before their first
use, repeated reads merged; exact against brute force on small graphs, fast on large ones."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hypothesis import given

from lazyparams import op
from lazyparams.analysis import estimate_peak_memory, used_vars, weight_struct_info
from lazyparams.errors import TransformError
from lazyparams.ir import (
    BlockBuilder,
    Function,
    IRModule,
    SeqExpr,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    prim,
)
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    FuseLayoutCast,
    KillAfterLastUse,
    LazyTransformParams,
    ScheduleForMemory,
    Sequential,
    standard_pipeline,
)
from lazyparams.transform import schedule_for_memory as schedule_module
from tests.programs import FUNC_NAME, SETTINGS, transform_programs
from tests.transform.harness import (
    assert_well_formed,
    check_pass,
    compare_lazy,
    run_eager,
    same_bits,
    weights_of,
)

FUNC = "main_transform_params"


def lazy_peak(mod: IRModule) -> int:
    func = mod[FUNC]
    assert isinstance(func, Function)
    return estimate_peak_memory(func, as_lazy=True).peak_bytes


# Before / Expected --------------------------------------------------------------------------


@I.ir_module
class Chains:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((8, 8), "float32"), R.Tensor((8, 8), "float32"), R.Tensor((4, 8), "float32")
        ),
    ) -> R.Tuple(R.Tensor((8, 16), "float16"), R.Tensor((8, 4), "float16")):
        with R.dataflow():
            a = params[0]
            b = params[1]
            c = params[2]
            ab = R.concat((a, b), axis=0)
            ct = R.permute_dims(c, axes=[1, 0])
            abt = R.permute_dims(ab, axes=[1, 0])
            ch = R.astype(ct, "float16")
            abh = R.astype(abt, "float16")
            gv = (abh, ch)
            R.output(gv)
        return gv


def test_loads_move_to_their_first_use_and_chains_finish_first() -> None:
    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(
                R.Tensor((8, 8), "float32"),
                R.Tensor((8, 8), "float32"),
                R.Tensor((4, 8), "float32"),
            ),
        ) -> R.Tuple(R.Tensor((8, 16), "float16"), R.Tensor((8, 4), "float16")):
            with R.dataflow():
                a = params[0]
                b = params[1]
                ab = R.concat((a, b), axis=0)
                abt = R.permute_dims(ab, axes=[1, 0])
                abh = R.astype(abt, "float16")
                c = params[2]
                ct = R.permute_dims(c, axes=[1, 0])
                ch = R.astype(ct, "float16")
                gv = (abh, ch)
                R.output(gv)
            return gv

    after = check_pass(ScheduleForMemory(), Chains, Expected)
    # c (128 B) is no longer held while the 512 B concat and its transpose coexist.
    assert (lazy_peak(Chains), lazy_peak(after)) == (1152, 1024)
    compare_lazy(Chains, standard_pipeline()(Chains))


def test_a_repeated_read_is_merged_into_the_first() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((8, 8), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((8, 8), "float32"), R.Tensor((8, 8), "float16")):
            with R.dataflow():
                a = params[0]
                x = R.permute_dims(a, axes=[1, 0])
                b = params[0]
                y = R.astype(b, "float16")
                gv = (x, y)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((8, 8), "float32"), R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((8, 8), "float32"), R.Tensor((8, 8), "float16")):
            with R.dataflow():
                a = params[0]
                x = R.permute_dims(a, axes=[1, 0])
                y = R.astype(a, "float16")
                gv = (x, y)
                R.output(gv)
            return gv

    check_pass(ScheduleForMemory(), Before, Expected)


def test_a_repeated_read_visible_after_its_block_is_the_one_kept() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float16"), R.Tensor((4, 4), "float32")):
            with R.dataflow():
                a = params[0]
                h = R.astype(a, "float16")
                b = params[0]
                R.output(h, b)
            t = R.permute_dims(b, axes=[1, 0])
            return (h, t)

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((4, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float16"), R.Tensor((4, 4), "float32")):
            with R.dataflow():
                b = params[0]
                h = R.astype(b, "float16")
                R.output(h, b)
            t = R.permute_dims(b, axes=[1, 0])
            return (h, t)

    check_pass(ScheduleForMemory(), Before, Expected)


def test_impure_calls_keep_their_order() -> None:
    # Running n1 before x would free t0 before the 1 KiB concat (1280 B instead of 1536 B),
    # but n1 is impure and must follow n0, which reads x.
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main_transform_params(
            params: R.Tuple(R.Tensor((8, 16), "float32")),
        ) -> R.Tuple(R.Tensor((16, 16), "float32")):
            w = params[0]
            t0 = R.strided_slice(w, axes=[0], begin=[0], end=[4])
            t1 = R.strided_slice(w, axes=[0], begin=[4], end=[8])
            x = R.concat((t1, t1, t1, t1), axis=0)
            n0 = R.call_packed("note", x, sinfo_args=(R.Object,))
            n1 = R.call_packed("note", t0, sinfo_args=(R.Object,))
            return (x,)

    after = check_pass(ScheduleForMemory(), Before, Before)
    assert lazy_peak(after) == 1536


def test_bindings_never_cross_blocks() -> None:
    @I.ir_module
    class Before:
        @R.function
        def main_transform_params(
            params: R.Tuple(
                R.Tensor((8, 8), "float32"),
                R.Tensor((8, 8), "float32"),
                R.Tensor((4, 4), "float32"),
            ),
        ) -> R.Tuple(
            R.Tensor((8, 8), "float16"), R.Tensor((4, 4), "float16"), R.Tensor((8, 8), "float16")
        ):
            with R.dataflow():
                a = params[0]
                c = params[2]
                b = params[1]
                at = R.permute_dims(a, axes=[1, 0])
                ah = R.astype(at, "float16")
                R.output(ah, c, b)
            bh = R.astype(b, "float16")
            ch = R.astype(c, "float16")
            return (ah, ch, bh)

    @I.ir_module
    class Expected:
        @R.function
        def main_transform_params(
            params: R.Tuple(
                R.Tensor((8, 8), "float32"),
                R.Tensor((8, 8), "float32"),
                R.Tensor((4, 4), "float32"),
            ),
        ) -> R.Tuple(
            R.Tensor((8, 8), "float16"), R.Tensor((4, 4), "float16"), R.Tensor((8, 8), "float16")
        ):
            with R.dataflow():
                a = params[0]
                at = R.permute_dims(a, axes=[1, 0])
                ah = R.astype(at, "float16")
                b = params[1]
                c = params[2]
                R.output(ah, b, c)
            ch = R.astype(c, "float16")
            bh = R.astype(b, "float16")
            return (ah, ch, bh)

    check_pass(ScheduleForMemory(), Before, Expected)


def test_a_binding_using_a_symbolic_dim_follows_its_match_cast() -> None:
    # `z` reads no value, so the data flow alone would let it go first; but its shape needs
    # `n`, which only the match_cast binds, so it must follow `m`.
    n = prim.PrimVar("n")
    params = Var("params", TupleStructInfo((TensorStructInfo(None, "float32", 2),)))
    bb = BlockBuilder()
    a = bb.emit(TupleGetItem(params, 0), "a")
    m = bb.match_cast(a, TensorStructInfo((n, 4), "float32"), "m")
    z = bb.emit(op.zeros((n, 4), "float32"), "z")
    y = bb.emit(op.strided_slice(m, axes=[1], begin=[0], end=[1]), "y")
    func = bb.finish_function((params,), Tuple((z, y)))
    after = ScheduleForMemory()(IRModule({FUNC: func}))[FUNC]
    assert isinstance(after, Function)
    order = [b.var.name_hint for b in after.body.blocks[0].bindings]
    assert order.index("z") > order.index("m")
    assert order == ["a", "m", "y", "z"]  # the slice frees `a` before `z` is made


def test_functions_are_chosen_like_the_lazy_pass_and_bad_input_is_refused() -> None:
    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            a = R.add(x, x)
            b = R.multiply(x, x)
            c = R.add(a, b)
            return c

    assert ScheduleForMemory()(Mod)["main"] is Mod["main"]  # not a transform function
    with pytest.raises(TransformError, match="expected a function named 'nope'"):
        ScheduleForMemory(func_names=["nope"])(Mod)
    with pytest.raises(TransformError, match="ScheduleForMemory: expected an IRModule"):
        ScheduleForMemory()(Mod["main"])  # type: ignore[arg-type]


# Exactness against brute force ------------------------------------------------------------


def topological_orders(func: Function) -> Iterator[list[int]]:
    """Every order of the (single block's) bindings that respects the data flow."""
    bindings = func.bindings()
    defined = {b.var: i for i, b in enumerate(bindings)}
    preds = [{defined[v] for v in used_vars(b.value) if v in defined} for b in bindings]

    def extend(order: list[int], done: set[int]) -> Iterator[list[int]]:
        if len(order) == len(bindings):
            yield list(order)
        for i in range(len(bindings)):
            if i not in done and preds[i] <= done:
                yield from extend([*order, i], done | {i})

    yield from extend([], set())


def reordered(func: Function, order: list[int]) -> Function:
    block = func.body.blocks[0]
    new_block = type(block)(tuple(block.bindings[i] for i in order))
    body = SeqExpr((new_block,), func.body.body)
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)


@SETTINGS
@given(transform_programs(max_params=4, max_ops=5))
def test_the_schedule_is_optimal_against_every_order(mod: IRModule) -> None:
    func = mod[FUNC_NAME]
    assert isinstance(func, Function)
    if len(func.body.blocks) != 1 or len(func.bindings()) > 8:
        return
    best = min(
        estimate_peak_memory(reordered(func, order), as_lazy=True).peak_bytes
        for order in topological_orders(func)
    )
    assert lazy_peak(ScheduleForMemory()(mod)) == best


# Properties -------------------------------------------------------------------------------


def check_schedule(mod: IRModule) -> None:
    """The schedule is valid, keeps the outputs, never raises the peak, and is what the
    pipeline's lazy function really peaks at."""
    text = mod.script()
    after = ScheduleForMemory()(mod)
    assert mod.script() == text
    assert_well_formed(after)  # a use before its definition would be ill formed
    before_func, after_func = mod[FUNC_NAME], after[FUNC_NAME]
    assert isinstance(before_func, Function) and isinstance(after_func, Function)
    kept = {b.var for b in before_func.bindings()}
    assert {b.var for b in after_func.bindings()} <= kept
    weights = weights_of(mod)
    assert same_bits(run_eager(after, weights), run_eager(mod, weights))
    assert lazy_peak(after) <= lazy_peak(mod)
    inputs = weight_struct_info(before_func)
    unscheduled = Sequential([LazyTransformParams(), KillAfterLastUse()])(mod)[FUNC_NAME]
    piped = standard_pipeline()(mod)[FUNC_NAME]
    assert isinstance(unscheduled, Function) and isinstance(piped, Function)
    fused = ScheduleForMemory()(FuseLayoutCast()(mod))  # the pipeline fuses, then schedules
    assert estimate_peak_memory(piped, inputs=inputs).peak_bytes == lazy_peak(fused)
    assert lazy_peak(fused) <= lazy_peak(after)  # fusing never raises the peak
    assert lazy_peak(after) <= estimate_peak_memory(unscheduled, inputs=inputs).peak_bytes


@SETTINGS
@given(transform_programs(max_params=5, max_ops=10))
def test_schedules_are_valid_and_never_raise_the_peak(mod: IRModule) -> None:
    check_schedule(mod)


@SETTINGS
@given(transform_programs(max_params=5, max_ops=10))
def test_the_greedy_order_is_valid_and_never_raises_the_peak(mod: IRModule) -> None:
    exact = schedule_module.EXACT_LIMIT
    schedule_module.EXACT_LIMIT = 0
    try:
        check_schedule(mod)
    finally:
        schedule_module.EXACT_LIMIT = exact


def test_the_greedy_order_finishes_each_loaded_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_module, "EXACT_LIMIT", 0)
    calls: list[int] = []
    greedy = schedule_module.greedy_order
    monkeypatch.setattr(schedule_module, "greedy_order", lambda g: calls.append(1) or greedy(g))
    after = ScheduleForMemory()(Chains)
    assert calls and lazy_peak(after) == 1024
    names = [b.var.name_hint for b in after[FUNC].bindings()]
    assert names.index("abh") < names.index("c") or names.index("ch") < names.index("a")


# Scale ------------------------------------------------------------------------------------


def test_ten_thousand_bindings_schedule_in_seconds() -> None:
    from benchmarks.workloads import largest_step_bytes, llama_like

    mod = llama_like(600, d=64, f=96)
    func = mod[FUNC]
    assert isinstance(func, Function) and len(func.bindings()) > 10_000
    start = time.perf_counter()
    after = ScheduleForMemory()(mod)
    elapsed = time.perf_counter() - start
    assert elapsed < 10.0, f"scheduling took {elapsed:.1f} s"
    assert lazy_peak(after) == largest_step_bytes(func)
