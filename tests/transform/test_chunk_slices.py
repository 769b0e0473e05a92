"""Slices that leave the split axis whole are chain steps: a fused expert tensor (experts,
hidden, 2 x width) transposed and cut into its gate and up halves runs a few experts at a
time, bit for bit as whole, at the peak the estimate predicts."""

from __future__ import annotations

from lazyparams.analysis import estimate_peak_memory
from lazyparams.ir import Function
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import ChunkRows
from lazyparams.transform.chunk_chains import find_chains
from tests.transform.harness import (
    FUNC,
    assert_well_formed,
    check_kills,
    run_eager,
    same_bits,
    weights_of,
)
from tests.transform.test_chunk_rows import lazy_of, run_rows


@I.ir_module
class Fused:
    """gate_up (experts, hidden, 2 x width) as two (experts, width, hidden) halves: the first
    and second half of the columns, and the even and odd ones."""

    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((8, 4, 6), "float32")),
    ) -> R.Tuple(
        R.Tensor((8, 3, 4), "float32"),
        R.Tensor((8, 3, 4), "float32"),
        R.Tensor((8, 3, 4), "float16"),
    ):
        fused = R.permute_dims(params[0], axes=[0, 2, 1])
        gate = R.strided_slice(fused, axes=[1], begin=[0], end=[3], strides=[1])
        up = R.strided_slice(fused, axes=[1], begin=[3], end=[6], strides=[1])
        every_other = R.strided_slice(fused, axes=[1], begin=[1], end=[6], strides=[2])
        odd = R.astype(every_other, "float16")
        gv = (gate, up, odd)
        return gv


@I.ir_module
class AlongTheSplit:
    @R.function
    def main_transform_params(
        params: R.Tuple(R.Tensor((8, 4), "float32")),
    ) -> R.Tuple(R.Tensor((4, 4), "float32")):
        half = R.strided_slice(params[0], axes=[0], begin=[0], end=[4], strides=[1])
        gv = (half,)
        return gv


def test_fused_experts_run_a_few_at_a_time_bit_for_bit() -> None:
    lazy, inputs = lazy_of(Fused)
    whole = estimate_peak_memory(lazy[FUNC], inputs=inputs).peak_bytes  # type: ignore[arg-type]
    after = ChunkRows(2 * 4 * 6 * 4, inputs=inputs)(lazy)  # two experts a block
    assert_well_formed(after)
    func = after[FUNC]
    assert isinstance(func, Function)
    check_kills(func)
    outputs, peak = run_rows(after, weights_of(Fused))
    assert same_bits(outputs, run_eager(Fused, weights_of(Fused)))
    assert peak == estimate_peak_memory(func, inputs=inputs).peak_bytes < whole


def test_a_slice_along_the_split_axis_ends_the_chain() -> None:
    lazy, inputs = lazy_of(AlongTheSplit)
    assert find_chains(lazy[FUNC], inputs) == []  # type: ignore[arg-type]
