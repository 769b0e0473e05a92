"""ChunkRows: row-separable chains run block by block, bit for bit as before, each output row
handed off once, at the peak the estimate predicts; everything else is left alone."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazyparams import op
from lazyparams.analysis import estimate_peak_memory, weight_struct_info
from lazyparams.errors import TransformError
from lazyparams.ir import (
    BlockBuilder,
    Constant,
    Expr,
    Function,
    IRModule,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
)
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import ChunkRows, standard_pipeline
from lazyparams.transform.chunk_chains import find_chains
from lazyparams.transform.chunk_rows import GET_COLS, GET_ROWS, SET_ROWS
from tests.programs import SETTINGS, transform_programs
from tests.transform.harness import (
    FUNC,
    assert_round_trip,
    assert_well_formed,
    check_kills,
    check_pass,
    extern_calls,
    run_eager,
    same_bits,
    weights_of,
)


class RowStore:
    """Whole and row-block loads and hand-offs over arrays; refuses a row handed off twice."""

    def __init__(self, weights: tuple[np.ndarray, ...]) -> None:
        self.weights = weights
        self.whole: dict[int, Any] = {}
        self.rows: dict[int, list[tuple[int, np.ndarray]]] = {}

    def externs(self) -> dict[str, Any]:
        return {
            "get_item": lambda i: self.weights[int(i)],
            "set_item": self.set_item,
            GET_ROWS: lambda i, a, b: self.weights[int(i)][int(a) : int(b)],
            GET_COLS: lambda i, a, b: np.ascontiguousarray(
                self.weights[int(i)][:, int(a) : int(b)]
            ),
            SET_ROWS: self.set_rows,
        }

    def set_item(self, index: Any, value: Any) -> None:
        assert int(index) not in self.whole and int(index) not in self.rows
        self.whole[int(index)] = value

    def set_rows(self, index: Any, start: Any, block: np.ndarray) -> None:
        assert int(index) not in self.whole
        self.rows.setdefault(int(index), []).append((int(start), np.array(block)))

    def outputs(self) -> tuple[Any, ...]:
        found = dict(self.whole)
        for index, parts in self.rows.items():
            parts.sort(key=lambda p: p[0])
            covered = 0
            for start, block in parts:
                assert start == covered, f"output {index}: rows from {start}, expected {covered}"
                covered += block.shape[0]
            found[index] = np.concatenate([block for _, block in parts])
        assert sorted(found) == list(range(len(found)))
        return tuple(found[i] for i in range(len(found)))


def run_rows(mod: IRModule, weights: tuple[np.ndarray, ...]) -> tuple[tuple[Any, ...], int]:
    """The outputs of a lazy module run over `weights`, and the VM's peak."""
    store = RowStore(weights)
    vm = VirtualMachine(mod, store.externs())
    vm[FUNC]()
    return store.outputs(), vm.stats.peak_bytes


def lazy_of(eager: IRModule) -> tuple[IRModule, tuple[Any, ...]]:
    func = eager[FUNC]
    assert isinstance(func, Function)
    return standard_pipeline()(eager), weight_struct_info(func)


def chunked_run(
    eager: IRModule, lazy: IRModule, inputs: Any, block: int, *, round_trip: bool = True
) -> tuple[Function, int]:
    """`lazy` chunked at `block` bytes, checked (well formed, kills, every bit as `eager`, the
    peak as predicted): the chunked function and its measured peak."""
    after = ChunkRows(block, inputs=inputs)(lazy)
    assert_well_formed(after)
    if round_trip:
        assert_round_trip(after)
    check_kills(after[FUNC])
    weights = weights_of(eager)
    outputs, peak = run_rows(after, weights)
    assert same_bits(outputs, run_eager(eager, weights))
    chunked = after[FUNC]
    assert isinstance(chunked, Function)
    assert peak == estimate_peak_memory(chunked, inputs=inputs).peak_bytes
    return chunked, peak


# Before / Expected -----------------------------------------------------------------------------


def test_a_cast_runs_in_blocks_of_rows() -> None:
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            w = R.match_cast(
                R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                R.Tensor((4, 2), "float32"),
            )
            y = R.astype(w, "float16")
            k0 = R.vm.kill_object(w)
            s0 = R.call_packed("set_item", R.prim_value(0), y, sinfo_args=(R.Object,))
            b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
            s1 = R.call_packed("set_item", R.prim_value(1), b, sinfo_args=(R.Object,))
            k1 = R.vm.kill_object(b)
            gv = (s0, s1)
            return gv

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            w = R.match_cast(
                R.call_packed(
                    "get_item_rows",
                    R.prim_value(0),
                    R.prim_value(0),
                    R.prim_value(2),
                    sinfo_args=(R.Object,),
                ),
                R.Tensor((2, 2), "float32"),
            )
            y = R.astype(w, "float16")
            k0 = R.vm.kill_object(w)
            r0 = R.call_packed(
                "set_item_rows", R.prim_value(0), R.prim_value(0), y, sinfo_args=(R.Object,)
            )
            k1 = R.vm.kill_object(y)
            w1 = R.match_cast(
                R.call_packed(
                    "get_item_rows",
                    R.prim_value(0),
                    R.prim_value(2),
                    R.prim_value(4),
                    sinfo_args=(R.Object,),
                ),
                R.Tensor((2, 2), "float32"),
            )
            y1 = R.astype(w1, "float16")
            k2 = R.vm.kill_object(w1)
            s0 = R.call_packed(
                "set_item_rows", R.prim_value(0), R.prim_value(2), y1, sinfo_args=(R.Object,)
            )
            k3 = R.vm.kill_object(y1)
            b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
            s1 = R.call_packed("set_item", R.prim_value(1), b, sinfo_args=(R.Object,))
            k4 = R.vm.kill_object(b)
            gv = (s0, s1)
            return gv

    after = check_pass(ChunkRows(16), Before, Expected)
    check_kills(after[FUNC])
    weights = (np.arange(8, dtype=np.float32).reshape(4, 2), np.ones(3, np.float32))
    outputs, _ = run_rows(after, weights)
    assert same_bits(outputs, (weights[0].astype(np.float16), weights[1]))


def test_a_transpose_reads_column_blocks_and_writes_row_blocks() -> None:
    @I.ir_module
    class Before:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object):
            w = R.match_cast(
                R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                R.Tensor((2, 4), "float32"),
            )
            t = R.permute_dims(w, axes=[1, 0])
            k0 = R.vm.kill_object(w)
            s0 = R.call_packed("set_item", R.prim_value(0), t, sinfo_args=(R.Object,))
            gv = (s0,)
            return gv

    @I.ir_module
    class Expected:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object):
            w = R.match_cast(
                R.call_packed(
                    "get_item_cols",
                    R.prim_value(0),
                    R.prim_value(0),
                    R.prim_value(2),
                    sinfo_args=(R.Object,),
                ),
                R.Tensor((2, 2), "float32"),
            )
            t = R.permute_dims(w, axes=[1, 0])
            k0 = R.vm.kill_object(w)
            r0 = R.call_packed(
                "set_item_rows", R.prim_value(0), R.prim_value(0), t, sinfo_args=(R.Object,)
            )
            k1 = R.vm.kill_object(t)
            w1 = R.match_cast(
                R.call_packed(
                    "get_item_cols",
                    R.prim_value(0),
                    R.prim_value(2),
                    R.prim_value(4),
                    sinfo_args=(R.Object,),
                ),
                R.Tensor((2, 2), "float32"),
            )
            t1 = R.permute_dims(w1, axes=[1, 0])
            k2 = R.vm.kill_object(w1)
            s0 = R.call_packed(
                "set_item_rows", R.prim_value(0), R.prim_value(2), t1, sinfo_args=(R.Object,)
            )
            k3 = R.vm.kill_object(t1)
            gv = (s0,)
            return gv

    after = check_pass(ChunkRows(16), Before, Expected)
    weights = (np.arange(8, dtype=np.float32).reshape(2, 4),)
    outputs, _ = run_rows(after, weights)
    assert same_bits(outputs, (weights[0].T.copy(),))


# Chains the tracing frontend makes -----------------------------------------------------------


@I.ir_module
class Quantized:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((8, 6), "float32"), R.Tensor((8, 6), "float32")),
    ) -> R.Tuple(
        R.Tensor((8, 6), "int8"),
        R.Tensor((8,), "float32"),
        R.Tensor((8, 3), "uint8"),
        R.Tensor((8, 1), "float32"),
        R.Tensor((6, 8), "float16"),
    ):
        w = params[0]
        scaled = R.multiply(
            w, R.const([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0]], "float32")
        )
        shifted = R.add(scaled, R.const(0.5, "float32"))
        q8 = R.quantize_int8(shifted, axis=0)
        q4 = R.quantize_int4(w, group_size=6)
        v = params[1]
        vt = R.permute_dims(v, axes=[1, 0])
        t = R.astype(vt, "float16")
        gv = (q8[0], q8[1], q4[0], q4[1], t)
        return gv


@pytest.mark.parametrize("block", [1, 24, 50, 100, 1000])
def test_chunked_chains_keep_every_bit_and_peak_as_predicted(block: int) -> None:
    lazy, inputs = lazy_of(Quantized)
    after = ChunkRows(block, inputs=inputs)(lazy)
    assert_well_formed(after)
    assert_round_trip(after)
    check_kills(after[FUNC])
    weights = weights_of(Quantized)
    outputs, peak = run_rows(after, weights)
    assert same_bits(outputs, run_eager(Quantized, weights))
    func = after[FUNC]
    assert isinstance(func, Function)
    assert peak == estimate_peak_memory(func, inputs=inputs).peak_bytes
    whole = estimate_peak_memory(lazy[FUNC], inputs=inputs).peak_bytes  # type: ignore[arg-type]
    assert peak < whole or block >= 1000


def test_blocks_are_evened_out_and_capped() -> None:
    lazy, inputs = lazy_of(Quantized)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    by_input = {c.index: c for c in find_chains(func, inputs)}
    rows, cols = by_input[0], by_input[1]
    assert (rows.axis, rows.length, rows.row_bytes) == (0, 8, 24)
    assert (cols.axis, cols.length, cols.row_bytes) == (1, 6, 32)
    assert ChunkRows(24 * 3).rows(rows) == 3  # 3 rows fit: 3 blocks of 8 rows -> 3, 3, 2
    assert ChunkRows(24 * 5).rows(rows) == 4  # 5 rows fit: 2 blocks, evened out to 4 and 4
    assert ChunkRows(1, max_chunks=3).rows(rows) == 3
    assert ChunkRows(10**6).rows(rows) == 8  # fits whole: left alone
    assert [c.index for c in ChunkRows(191, inputs=inputs).chains(func)] == [1, 0]
    assert ChunkRows(192, inputs=inputs).chains(func) == []  # both fit whole in 192 bytes


def test_constants_varying_along_the_rows_are_cut_with_the_blocks() -> None:
    lazy, inputs = lazy_of(Quantized)
    after = ChunkRows(48, inputs=inputs, only_inputs=[0])(lazy)
    func = after[FUNC]
    assert isinstance(func, Function)
    shapes = {
        arg.data.shape
        for b in func.bindings()
        for arg in getattr(b.value, "args", ())
        if isinstance(arg, Constant)
    }
    assert shapes == {(2, 1), ()}
    assert len(extern_calls(func, GET_ROWS)) == 4
    assert extern_calls(func, GET_COLS) == []  # input 1 was not asked for


def test_a_second_run_finds_nothing_left_to_split() -> None:
    lazy, inputs = lazy_of(Quantized)
    once = ChunkRows(24, inputs=inputs)(lazy)
    assert ChunkRows(24, inputs=inputs)(once) is once


@I.ir_module
class Diamond:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((6, 4), "float32")),
    ) -> R.Tuple(R.Tensor((6, 4), "float32"), R.Tensor((6, 4), "float16")):
        x = params[0]
        y = R.multiply(x, R.const(2.0, "float32"))
        w = R.add(y, R.const(1.0, "float32"))
        z = R.add(x, w)
        h = R.astype(z, "float16")
        gv = (w, h)
        return gv


def test_a_step_reading_the_load_and_a_later_step_is_in_the_chain() -> None:
    lazy, inputs = lazy_of(Diamond)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    (chain,) = find_chains(func, inputs)
    assert [b.var.name_hint for b in chain.members if b.var in chain.splits] == [
        "x",
        "y",
        "w",
        "z",
        "h",
    ]
    after = ChunkRows(16, inputs=inputs)(lazy)
    assert len(extern_calls(after[FUNC], GET_ROWS)) == 6
    outputs, _ = run_rows(after, weights_of(Diamond))
    assert same_bits(outputs, run_eager(Diamond, weights_of(Diamond)))


# What is left whole ---------------------------------------------------------------------------


@I.ir_module
class NotSeparable:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((8, 4), "float32"),
            R.Tensor((8, 4), "float32"),
            R.Tensor((8, 4), "float32"),
            R.Tensor((8, 4), "float32"),
            R.Tensor((8, 4, 2), "float32"),
        ),
    ) -> R.Tuple(
        R.Tensor((16, 4), "float32"),
        R.Tensor((8, 4), "int8"),
        R.Tensor((4,), "float32"),
        R.Tensor((4, 8), "float32"),
        R.Tensor((8, 4), "float32"),
        R.Tensor((8, 2, 4), "float32"),
    ):
        a = params[0]
        joined = R.concat((R.astype(a, "float32"), params[1]), axis=0)
        q = R.quantize_int8(params[2], axis=1)
        c = params[3]
        both = (R.permute_dims(c, axes=[1, 0]), R.multiply(c, c))
        d = R.permute_dims(params[4], axes=[0, 2, 1])
        gv = (joined, q[0], q[1], both[0], both[1], d)
        return gv


def test_steps_that_mix_rows_are_left_whole() -> None:
    """A concat with another weight, scales over the rows, and a value wanted both as rows and
    as columns stay whole; the 3-D transpose keeps its rows and is the one chain found."""
    lazy, inputs = lazy_of(NotSeparable)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    found = find_chains(func, inputs)
    assert [(c.index, c.axis) for c in found] == [(4, 0)]
    after = ChunkRows(1, inputs=inputs, only_inputs=[0, 1, 2, 3])(lazy)
    assert after is lazy
    outputs, _ = run_rows(ChunkRows(1, inputs=inputs)(lazy), weights_of(NotSeparable))
    assert same_bits(outputs, run_eager(NotSeparable, weights_of(NotSeparable)))


def test_dataflow_blocks_and_unknown_loads_are_left_whole() -> None:
    @I.ir_module
    class Seedlike:
        @R.function(pure=False)
        def main_transform_params() -> R.Tuple(R.Object, R.Object):
            with R.dataflow():
                w = R.match_cast(
                    R.call_packed("get_item", R.prim_value(0), sinfo_args=(R.Object,)),
                    R.Tensor((4, 2), "float32"),
                )
                y = R.astype(w, "float16")
                s0 = R.call_packed("set_item", R.prim_value(0), y, sinfo_args=(R.Object,))
                R.output(s0)
            b = R.call_packed("get_item", R.prim_value(1), sinfo_args=(R.Object,))
            s1 = R.call_packed("set_item", R.prim_value(1), b, sinfo_args=(R.Object,))
            gv = (s0, s1)
            return gv

    assert ChunkRows(1)(Seedlike) is Seedlike
    sized = ChunkRows(1, inputs=[TensorStructInfo(None, "float32", 2)] * 2)
    assert sized(Seedlike) is Seedlike  # no static shape to cut
    unpacked = ChunkRows(1, inputs=[TensorStructInfo((4, 2), "float32")] * 2)(Seedlike)
    assert len(extern_calls(unpacked[FUNC], GET_ROWS)) == 4  # the pass-through of input 1
    assert len(extern_calls(unpacked[FUNC], SET_ROWS)) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_bytes": 0}, "expected block_bytes to be a positive int, got 0"),
        ({"block_bytes": True}, "expected block_bytes to be a positive int, got True"),
        ({"block_bytes": 8, "max_chunks": 0}, "expected max_chunks to be a positive int, got 0"),
        ({"block_bytes": 8, "inputs": [3]}, r"expected inputs to be struct info, got \[3\]"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(TransformError, match=f"ChunkRows: {message}"):
        ChunkRows(**kwargs)


def test_only_named_functions_are_rewritten() -> None:
    lazy, _ = lazy_of(Quantized)
    with pytest.raises(TransformError, match="expected a function named 'other'"):
        ChunkRows(8, func_names=["other"])(lazy)


# Random programs ------------------------------------------------------------------------------


def check_chunked(mod: IRModule, block: int) -> IRModule:
    """ChunkRows after the standard pipeline keeps every output bit, hands each row off once,
    and peaks exactly where the estimate says, never above the unchunked function."""
    lazy, inputs = lazy_of(mod)
    after = ChunkRows(block, inputs=inputs)(lazy)
    assert_well_formed(after)
    assert_round_trip(after)
    check_kills(after[FUNC])
    weights = weights_of(mod)
    outputs, peak = run_rows(after, weights)
    expected = run_eager(mod, weights)
    assert same_bits(outputs, expected if isinstance(expected, tuple) else (expected,))
    func, before = after[FUNC], lazy[FUNC]
    assert isinstance(func, Function) and isinstance(before, Function)
    assert peak == estimate_peak_memory(func, inputs=inputs).peak_bytes
    assert peak <= estimate_peak_memory(before, inputs=inputs).peak_bytes
    return after


@SETTINGS
@given(transform_programs(), st.sampled_from([1, 8, 40, 200]))
def test_random_programs_keep_every_bit_at_the_predicted_peak(mod: IRModule, block: int) -> None:
    check_chunked(mod, block)


@st.composite
def chain_programs(draw: Any) -> IRModule:
    """Transform programs made of the steps chains are built from, over 1-3 weights: casts,
    products with scalars, rows and columns of constants, transposes, and int8 or int4
    quantization along either axis; some intermediates are outputs too."""
    shapes = st.tuples(st.integers(1, 9), st.sampled_from([2, 4, 6]))
    sinfos = [
        TensorStructInfo(s, "float32") for s in draw(st.lists(shapes, min_size=1, max_size=3))
    ]
    bb = BlockBuilder()
    params = Var("params", TupleStructInfo(tuple(sinfos)))
    outputs: list[Expr] = []
    for index in range(len(sinfos)):
        value = bb.emit(TupleGetItem(params, index), f"w{index}")
        for _ in range(draw(st.integers(0, 3))):
            value = bb.emit(draw(_chain_steps(value)), "lv")
            if draw(st.booleans()):
                outputs.append(value)
        outputs += draw(_chain_ends(bb, value))
    result = bb.emit(Tuple(tuple(outputs)), "gv")
    return IRModule({FUNC: bb.finish_function((params,), result)})


def _chain_steps(value: Var) -> st.SearchStrategy[Expr]:
    sinfo = value.struct_info
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None
    rows, cols = sinfo.static_shape
    other = "float16" if sinfo.dtype == "float32" else "float32"
    half = np.float16 if sinfo.dtype == "float16" else np.float32
    return st.sampled_from(
        [
            op.astype(value, other),
            op.permute_dims(value, [1, 0]),
            op.multiply(value, Constant(np.asarray(1.5, half))),
            op.add(value, Constant(np.linspace(-1, 1, cols).astype(half))),
            op.multiply(value, Constant(np.linspace(-2, 2, rows).astype(half).reshape(rows, 1))),
        ]
    )


def _chain_ends(bb: BlockBuilder, value: Var) -> st.SearchStrategy[list[Expr]]:
    sinfo = value.struct_info
    assert isinstance(sinfo, TensorStructInfo) and sinfo.static_shape is not None

    def quantized(call: Expr) -> list[Expr]:
        pair = bb.emit(call, "q")
        return [TupleGetItem(pair, 0), TupleGetItem(pair, 1)]

    ends = [st.just([value])]
    ends += [st.builds(quantized, st.just(op.quantize_int8(value, axis))) for axis in (0, 1)]
    if sinfo.static_shape[1] % 2 == 0:
        ends.append(st.builds(quantized, st.just(op.quantize_int4(value, group_size=2))))
    return st.one_of(ends)


@SETTINGS
@given(chain_programs(), st.sampled_from([1, 16, 64]))
def test_chain_programs_keep_every_bit_at_the_predicted_peak(mod: IRModule, block: int) -> None:
    check_chunked(mod, block)


@I.ir_module
class Joined:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((8, 6), "float32"), R.Tensor((8, 6), "float32"), R.Tensor((6,), "float32")
        ),
    ) -> R.Tuple(R.Tensor((8, 6), "float16"), R.Tensor((6,), "float32")):
        a = params[0]
        b = params[1]
        scale = params[2]
        wa = R.multiply(a, R.const(0.75, "float32"))
        wb = R.multiply(b, R.const(0.25, "float32"))
        mixed = R.add(wa, wb)
        scaled = R.multiply(mixed, scale)
        out = R.astype(scaled, "float16")
        gv = (out, scale)
        return gv


@pytest.mark.parametrize("block", [1, 24, 100])
def test_loads_joined_by_element_wise_steps_run_in_blocks_together(block: int) -> None:
    """A weighted sum of two loads (a merge) is one chain of both loads; an operand that
    broadcasts along the rows (a vector over the columns) is used whole in every block."""
    lazy, inputs = lazy_of(Joined)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    chains = [c for c in find_chains(func, inputs) if len(c.indices) > 1]
    assert [sorted(c.indices) for c in chains] == [[0, 1]]
    chunked, peak = chunked_run(Joined, lazy, inputs, block)
    assert len(extern_calls(chunked, GET_ROWS)) == 2 * math.ceil(
        8 / ChunkRows(block).rows(chains[0])
    )
    whole = estimate_peak_memory(func, inputs=inputs).peak_bytes
    assert peak < whole


@I.ir_module
class Reduced:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((8, 6), "float32"), R.Tensor((8, 6), "float32")),
    ) -> R.Tuple(R.Tensor((8, 6), "float32"), R.Tensor((), "float32")):
        a = params[0]
        b = params[1]
        prod = R.multiply(a, b)
        rows = R.sum(prod, axis=[1])
        total = R.sum(rows)
        scale = R.divide(total, R.const(48.0, "float32"))
        wa = R.multiply(a, scale)
        out = R.add(wa, b)
        gv = (out, total)
        return gv


@pytest.mark.parametrize("block", [1, 24, 100])
def test_a_reduction_runs_as_a_pass_over_blocks_then_the_steps_that_need_it(block: int) -> None:
    """A total over the rows (row sums gathered after a first pass) scales the rows in a
    second pass that loads the blocks again: the same bits as whole, at the predicted peak."""
    lazy, inputs = lazy_of(Reduced)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    [chain] = [c for c in find_chains(func, inputs) if len(c.indices) > 1]
    assert len(chain.phases) == 2 and len(chain.phases[0].gathered) == 1
    chunked, peak = chunked_run(Reduced, lazy, inputs, block)
    blocks = math.ceil(8 / ChunkRows(block).rows(chain))
    assert len(extern_calls(chunked, GET_ROWS)) == 2 * 2 * blocks  # two passes, two loads
    assert peak < estimate_peak_memory(func, inputs=inputs).peak_bytes


@I.ir_module
class LowRank:
    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((2, 6), "float32"), R.Tensor((8, 2), "float32"), R.Tensor((8, 6), "float32")
        ),
    ) -> R.Tuple(R.Tensor((8, 6), "float32")):
        a = params[0]
        b = params[1]
        ba = R.matmul(b, a)
        scaled = R.multiply(ba, R.const(2.0, "float32"))
        w = params[2]
        out = R.add(w, scaled)
        gv = (out,)
        return gv


@pytest.mark.parametrize("block", [1, 24, 100])
def test_a_matmul_runs_its_rows_in_blocks_against_its_whole_right_operand(block: int) -> None:
    """W + B @ A (a LoRA update): B's rows join W's chain; A, loaded and killed before W's
    load in the whole function, lives until the last block reads it."""
    lazy, inputs = lazy_of(LowRank)
    func = lazy[FUNC]
    assert isinstance(func, Function)
    [chain] = [c for c in find_chains(func, inputs) if len(c.indices) > 1]
    assert sorted(chain.indices) == [1, 2] and len(chain.free) == 1
    chunked_run(LowRank, lazy, inputs, block, round_trip=False)
