"""Inference, attrs and bad input of the sorting ops sort_rank and rank_mask, and of the
generator ops mt_seed, mt_uniform and mt_skip."""

from __future__ import annotations

import numpy as np

from lazyparams import op
from lazyparams.ir import Constant
from lazyparams.ir.prim import PrimVar
from lazyparams.ir.struct_info import TensorStructInfo
from tests.op.helpers import raises, si, t

n = PrimVar("n")
STATE = Constant(np.zeros(625, np.uint32))


def test_sort_rank_gives_int64_positions_of_x_shape() -> None:
    call = op.sort_rank(t((4, n)), axis=1)
    assert dict(call.attrs) == {"axis": 1, "descending": False}
    assert si(call) == TensorStructInfo((4, n), "int64")
    assert si(op.sort_rank(t((3,), "bfloat16"))) == TensorStructInfo((3,), "int64")
    assert si(op.sort_rank(t(None, ndim=2))) == TensorStructInfo(None, "int64", 2)


def test_rank_mask_gives_a_bool_mask_of_x_shape() -> None:
    call = op.rank_mask(t((4, 5)), 0, 7, descending=True)
    assert dict(call.attrs) == {"begin": 0, "end": 7, "descending": True}
    assert si(call) == TensorStructInfo((4, 5), "bool")
    assert si(op.rank_mask(t((4, 5)), 3, 3)) == TensorStructInfo((4, 5), "bool")


def test_sorting_ops_bad_input() -> None:
    with raises(r"R\.sort_rank: expected axis in \[-2, 2\) for a rank-2 tensor, got 2"):
        op.sort_rank(t((2, 3)), axis=2)
    with raises(r"R\.sort_rank: expected x of rank 1 or more, got a rank-0 tensor"):
        op.sort_rank(t(()))
    with raises(r"R\.sort_rank: expected x of a float dtype, got int32"):
        op.sort_rank(t((2,), "int32"))
    with raises(r"R\.sort_rank: expected descending to be True or False, got 1"):
        op.sort_rank(t((2,)), descending=1)  # type: ignore[arg-type]
    with raises(r"R\.rank_mask: expected 0 <= begin <= end, got begin=3, end=2"):
        op.rank_mask(t((4,)), 3, 2)
    with raises(r"R\.rank_mask: expected 0 <= begin <= end, got begin=-1, end=2"):
        op.rank_mask(t((4,)), -1, 2)
    with raises(r"R\.rank_mask: expected begin to be an int, got 0.5"):
        op.rank_mask(t((4,)), 0.5, 2)  # type: ignore[arg-type]


def test_generator_ops_take_a_state_and_give_uniforms_or_a_state() -> None:
    seeded = op.mt_seed(2**32 - 1)
    assert dict(seeded.attrs) == {"seed": 2**32 - 1}
    assert si(seeded) == TensorStructInfo((625,), "uint32")
    uniform = op.mt_uniform(STATE, (3, n))
    assert si(uniform) == TensorStructInfo((3, n), "float32")
    skip = op.mt_skip(STATE, 12)
    assert dict(skip.attrs) == {"count": 12}
    assert si(skip) == TensorStructInfo((625,), "uint32")


def test_generator_ops_bad_input() -> None:
    with raises(r"R\.mt_uniform: expected state of dtype uint32, got float32"):
        op.mt_uniform(t((625,)), (2,))
    with raises(r"R\.mt_skip: expected state of shape \(625,\), got R\.Tensor\(\(624,\)"):
        op.mt_skip(Constant(np.zeros(624, np.uint32)), 1)
    with raises(r"R\.mt_skip: expected count >= 0, got -1"):
        op.mt_skip(STATE, -1)
    with raises(r"R\.mt_seed: expected 0 <= seed < 2\*\*32, got 4294967296"):
        op.mt_seed(2**32)
    with raises(r"R\.mt_seed: expected seed to be an int, got True"):
        op.mt_seed(True)
    with raises(r"R\.mt_uniform: expected non-negative dims"):
        op.mt_uniform(STATE, (2, -1))
