"""Ranks by sorting: `sort_rank` (each element's position in its sorted row) and `rank_mask`
(the elements whose positions in the whole tensor's sorted order fall in a range).

Both sort as an unstable introsort does (libstdc++'s `std::sort`, which torch's CPU sort
uses): equal elements take the order its partitions leave, so a selection by rank picks the
same elements among ties as a merge method computed with torch does. Ascending order puts NaN
last, descending order first. They read whole tensors (no chunking). Imports `ir` and the op
layer's helpers.
"""

from __future__ import annotations

from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_bool,
    as_int,
    attr,
    fail,
    make_call,
    norm_axis,
    register,
    require_float,
    tensor_operand,
)


def sort_rank(x: Expr, axis: int = -1, descending: bool = False) -> Call:
    """`R.sort_rank(x, axis=-1, descending=False)`: for each element of the float tensor x, its
    position (int64, from 0) in x sorted along `axis`, equal elements ordered as `std::sort`
    leaves them."""
    return make_call("sort_rank", [x], {"axis": axis, "descending": descending})


def rank_mask(x: Expr, begin: int, end: int, descending: bool = False) -> Call:
    """`R.rank_mask(x, begin, end, descending=False)`: a bool mask of x's shape, true for the
    elements at positions [begin, end) of the whole of x sorted (`std::sort`'s tie order):
    `begin=0, end=k, descending=True` marks the k largest."""
    return make_call("rank_mask", [x], {"begin": begin, "end": end, "descending": descending})


def _infer_sort_rank(call: Call) -> TensorStructInfo:
    """x's shape, int64; the axis must be one of x's."""
    x = tensor_operand(call, 0)
    require_float("sort_rank", x)
    if x.ndim == 0:
        fail("sort_rank", "expected x of rank 1 or more, got a rank-0 tensor")
    if x.ndim > 0:
        norm_axis("sort_rank", attr(call, "axis"), x.ndim)
    return TensorStructInfo(x.shape, "int64", x.ndim)


def _infer_rank_mask(call: Call) -> TensorStructInfo:
    """x's shape, bool; the range must not start below 0 nor end before it starts."""
    x = tensor_operand(call, 0)
    require_float("rank_mask", x)
    begin, end = attr(call, "begin"), attr(call, "end")
    if not 0 <= begin <= end:
        fail("rank_mask", f"expected 0 <= begin <= end, got begin={begin}, end={end}")
    return TensorStructInfo(x.shape, "bool", x.ndim)


register(
    OpDef(
        "sort_rank",
        (
            OpParam("x", "expr"),
            OpParam("axis", "attr", required=False, default=-1),
            OpParam("descending", "attr", required=False, default=False),
        ),
        _infer_sort_rank,
        normalize={"axis": as_int, "descending": as_bool},
    ),
    OpDef(
        "rank_mask",
        (
            OpParam("x", "expr"),
            OpParam("begin", "attr"),
            OpParam("end", "attr"),
            OpParam("descending", "attr", required=False, default=False),
        ),
        _infer_rank_mask,
        normalize={"begin": as_int, "end": as_int, "descending": as_bool},
    ),
)
