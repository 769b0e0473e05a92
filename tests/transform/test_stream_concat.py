"""StreamConcat: a concatenation's parts are written as they come, bit for bit as the whole,
at the peak the estimate predicts, which holds one part instead of all of them."""

from __future__ import annotations

import numpy as np

from lazyparams.analysis import estimate_peak_memory
from lazyparams.ir import Call, Function, IRModule, PrimValue
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import ChunkRows
from lazyparams.transform.chunk_rows import SET_ROWS
from lazyparams.transform.stream_concat import StreamConcat, find_streams
from lazyparams.transform.util import is_op_call
from tests.transform.harness import (
    FUNC,
    assert_round_trip,
    assert_well_formed,
    check_kills,
    extern_calls,
    run_eager,
    same_bits,
    weights_of,
)
from tests.transform.test_chunk_rows import lazy_of, run_rows


@I.ir_module
class Experts:
    """Four experts stacked, scaled per expert by a constant and quantized; a router kept."""

    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((6, 64), "float32"),
            R.Tensor((6, 64), "float32"),
            R.Tensor((6, 64), "float32"),
            R.Tensor((6, 64), "float32"),
            R.Tensor((4, 64), "float32"),
        ),
    ) -> R.Tuple(R.Tensor((4, 6, 64), "q8_0"), R.Tensor((4, 64), "float16")):
        e0 = R.expand_dims(params[0], axis=0)
        e1 = R.expand_dims(params[1], axis=0)
        e2 = R.expand_dims(params[2], axis=0)
        e3 = R.expand_dims(params[3], axis=0)
        stacked = R.concat((e0, e1, e2, e3), axis=0)
        scaled = R.multiply(stacked, R.const([[[1.0]], [[2.0]], [[-1.0]], [[0.5]]], "float32"))
        q = R.quantize_gguf(scaled, type="q8_0")
        router = R.astype(params[4], "float16")
        gv = (q, router)
        return gv


@I.ir_module
class Mixed:
    """Concatenations of parts of different lengths along rows: one cast, one handed off as
    it is, whose first part is a step's result."""

    @R.function
    def main_transform_params(
        params: R.Tuple(
            R.Tensor((3, 8), "float32"),
            R.Tensor((5, 8), "float32"),
            R.Tensor((3, 8), "float32"),
            R.Tensor((5, 8), "float32"),
        ),
    ) -> R.Tuple(R.Tensor((8, 8), "float16"), R.Tensor((8, 8), "float32")):
        joined = R.concat((params[0], params[1]), axis=0)
        half = R.astype(joined, "float16")
        summed = R.add(params[2], R.const(1.0, "float32"))
        again = R.concat((summed, params[3]), axis=0)
        gv = (half, again)
        return gv


def streamed(eager: IRModule) -> tuple[IRModule, Function, int]:
    """The lazy form of `eager` streamed and checked (well formed, kills, every bit as
    `eager`, the peak as predicted): the module, its function and the measured peak."""
    lazy, inputs = lazy_of(eager)
    after = StreamConcat(inputs=inputs)(lazy)
    assert_well_formed(after)
    assert_round_trip(after)
    func = after[FUNC]
    assert isinstance(func, Function)
    check_kills(func)
    outputs, peak = run_rows(after, weights_of(eager))
    assert same_bits(outputs, eager_outputs(eager, outputs))
    assert peak == estimate_peak_memory(func, inputs=inputs).peak_bytes
    return after, func, peak


def eager_outputs(eager: IRModule, like: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """`eager`'s outputs, each as rows of its flat view where the streamed output came in
    those (a stack's rows: [experts * rows, columns])."""
    whole = run_eager(eager, weights_of(eager))
    return tuple(w.reshape(o.shape) for w, o in zip(whole, like, strict=True))


def row_starts(func: Function) -> list[int]:
    """The first row of every `set_item_rows` of `func`, in body order."""
    found = []
    for binding in extern_calls(func, SET_ROWS):
        call = binding.value
        assert isinstance(call, Call) and isinstance(call.args[1], PrimValue)
        found.append(int(call.args[1].value.value))  # type: ignore[attr-defined]
    return found


def test_stacked_experts_are_written_expert_by_expert() -> None:
    lazy, inputs = lazy_of(Experts)
    whole = estimate_peak_memory(lazy[FUNC], inputs=inputs).peak_bytes  # type: ignore[arg-type]
    _, func, peak = streamed(Experts)
    assert row_starts(func) == [0, 6, 12, 18]  # each expert's rows, in the flat view
    assert not any(is_op_call(b.value, "concat") for b in func.bindings())
    one_expert = 6 * 64 * 4
    assert peak < whole and peak < 3 * one_expert  # a load, its scaled copy, its blocks


def test_parts_of_different_lengths_start_at_their_rows() -> None:
    _, func, _ = streamed(Mixed)
    assert row_starts(func) == [0, 3, 0, 3]


def test_a_part_made_by_a_step_streams_after_that_step() -> None:
    _, func, _ = streamed(Mixed)
    names = [b.var.name_hint for b in func.bindings()]
    assert "summed" in names  # the second concat's first part is a step's result


def test_a_part_read_elsewhere_leaves_the_concat_whole() -> None:
    @I.ir_module
    class Shared:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tensor((2, 4), "float16")):
            joined = R.concat((params[0], params[1]), axis=0)
            cast = R.astype(params[0], "float16")
            gv = (joined, cast)
            return gv

    lazy, _ = lazy_of(Shared)
    assert find_streams(lazy[FUNC]) == []  # type: ignore[arg-type]


def test_a_concat_along_columns_is_left_whole() -> None:
    @I.ir_module
    class Columns:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")),
        ) -> R.Tuple(R.Tensor((2, 8), "float32")):
            joined = R.concat((params[0], params[1]), axis=1)
            gv = (joined,)
            return gv

    lazy, _ = lazy_of(Columns)
    assert find_streams(lazy[FUNC]) == []  # type: ignore[arg-type]


def test_a_step_mixing_the_rows_leaves_the_concat_whole() -> None:
    @I.ir_module
    class Mixing:
        @R.function
        def main_transform_params(
            params: R.Tuple(R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")),
        ) -> R.Tuple(R.Tensor((4,), "float32")):
            joined = R.concat((params[0], params[1]), axis=0)
            total = R.sum(joined, axis=[0])
            gv = (total,)
            return gv

    lazy, _ = lazy_of(Mixing)
    assert find_streams(lazy[FUNC]) == []  # type: ignore[arg-type]


def test_streamed_parts_then_chunked_keep_every_bit() -> None:
    after, _, _ = streamed(Experts)
    _, inputs = lazy_of(Experts)
    chunked = ChunkRows(2 * 64 * 4, inputs=inputs)(after)  # two float32 rows
    assert_well_formed(chunked)
    check_kills(chunked[FUNC])  # type: ignore[arg-type]
    outputs, peak = run_rows(chunked, weights_of(Experts))
    assert same_bits(outputs, eager_outputs(Experts, outputs))
    func = chunked[FUNC]
    assert isinstance(func, Function)
    assert peak == estimate_peak_memory(func, inputs=inputs).peak_bytes
    assert row_starts(func)[:7] == [0, 2, 4, 6, 8, 10, 12]  # each expert's rows in blocks


def test_the_stream_holds_a_part_not_the_whole() -> None:
    lazy, inputs = lazy_of(Experts)
    func = StreamConcat(inputs=inputs)(lazy)[FUNC]
    assert isinstance(func, Function)
    profile = estimate_peak_memory(func, inputs=inputs)
    stacked = 4 * 6 * 64 * 4
    assert max(profile.timeline) < stacked
