"""A Mersenne Twister stream as values: `mt_seed` makes a generator state, `mt_uniform` draws
from one, `mt_skip` gives the state after some draws.

A state is a uint32 tensor of 625 elements: MT19937's 624 words and the position of the next
word, as numpy's `MT19937` keeps it (and torch's CPU generator, seeded the same way, holds the
same engine). Threading one state through a function, each draw taking the state the previous
one left, reproduces a run that drew from one generator in that order. Imports `ir` and the
op layer's helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

from lazyparams.ir.describe import describe
from lazyparams.ir.expr import Call, Expr
from lazyparams.ir.op_registry import OpParam
from lazyparams.ir.prim import as_prim, const_int
from lazyparams.ir.struct_info import TensorStructInfo
from lazyparams.op.base import (
    OpDef,
    as_int,
    as_shape,
    attr,
    fail,
    make_call,
    register,
    require_dtype,
    tensor_operand,
)

STATE_SIZE = 625
"""624 words of MT19937 and the index of the next one."""
_STATE_INFO = TensorStructInfo((as_prim(STATE_SIZE),), "uint32")


def mt_seed(seed: int) -> Call:
    """`R.mt_seed(seed)`: the state of a generator seeded with `seed` (0 <= seed < 2**32) as
    `torch.manual_seed(seed)` seeds torch's CPU generator (MT19937's `init_genrand`)."""
    return make_call("mt_seed", [], {"seed": seed})


def mt_uniform(state: Expr, shape: Sequence[int]) -> Call:
    """`R.mt_uniform(state, shape)`: the next prod(shape) 32-bit draws of the generator in
    `state`, in row-major order, each as a float32 uniform in [0, 1): its low 24 bits times
    2**-24 (torch's `uniform_real_distribution<float>`)."""
    return make_call("mt_uniform", [state], {"shape": shape})


def mt_skip(state: Expr, count: int) -> Call:
    """`R.mt_skip(state, count)`: the generator state after `count` 32-bit draws."""
    return make_call("mt_skip", [state], {"count": count})


def _state(op: str, call: Call) -> None:
    """Refuse a state that is not a uint32 tensor of STATE_SIZE elements."""
    state = tensor_operand(call, 0, "state")
    require_dtype(op, state, "uint32", "state")
    if state.shape is not None and [const_int(d) for d in state.shape] != [STATE_SIZE]:
        fail(op, f"expected state of shape ({STATE_SIZE},), got {describe(state)}")


def _infer_seed(call: Call) -> TensorStructInfo:
    """A state, from a seed that fits MT19937's 32-bit seeding."""
    seed = attr(call, "seed")
    if not 0 <= seed < 2**32:
        fail("mt_seed", f"expected 0 <= seed < 2**32, got {seed}")
    return _STATE_INFO


def _infer_uniform(call: Call) -> TensorStructInfo:
    """float32 of the given shape."""
    _state("mt_uniform", call)
    shape = attr(call, "shape")
    if any((const_int(d) or 0) < 0 for d in shape):
        fail("mt_uniform", "expected non-negative dims")
    return TensorStructInfo(shape, "float32")


def _infer_skip(call: Call) -> TensorStructInfo:
    """Another state."""
    _state("mt_skip", call)
    if attr(call, "count") < 0:
        fail("mt_skip", f"expected count >= 0, got {attr(call, 'count')}")
    return _STATE_INFO


_STATE = OpParam("state", "expr")
_UNIFORM = (_STATE, OpParam("shape", "attr"))
_SKIP = (_STATE, OpParam("count", "attr"))

register(
    OpDef("mt_seed", (OpParam("seed", "attr"),), _infer_seed, normalize={"seed": as_int}),
    OpDef("mt_uniform", _UNIFORM, _infer_uniform, normalize={"shape": as_shape}),
    OpDef("mt_skip", _SKIP, _infer_skip, normalize={"count": as_int}),
)
