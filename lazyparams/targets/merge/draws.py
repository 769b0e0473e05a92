"""The random stream of a merge: one MT19937 generator whose draws every random mask takes in
turn, as mergekit's run takes them from torch's global CPU generator.

`MaskStream(seed).uniform(shape)` traces the next prod(shape) draws as float32 uniforms
(`R.mt_uniform`) and moves the stream on (`R.mt_skip`): the generator's state (`R.mt_seed`
makes the first, as `torch.manual_seed(seed)` seeds torch's) is a small tensor threaded through
the function, so the masks are the same whatever order the compiler runs the tensors in.
Imports the frontend.
"""

from __future__ import annotations

import math
from typing import Any

from lazyparams.frontend.tensor import Tensor
from lazyparams.frontend.tracer import Tracer, active_tracer

SEEDS = range(2**32)
"""The seeds a merge accepts (mergekit's, which numpy's seeding bounds)."""


class MaskStream:
    """The merge's generator, drawn from in trace order (see the module)."""

    def __init__(self, seed: int) -> None:
        if seed not in SEEDS:
            raise ValueError(f"random seed {seed}: expected 0 <= seed < 2**32")
        self.seed = seed
        self._state: Tensor | None = None

    def uniform(self, shape: tuple[int, ...]) -> Tensor:
        """The next prod(shape) draws as float32 uniforms in [0, 1), shaped `shape`."""
        state = self._state
        if state is None:
            tracer = active_tracer("mt_seed")
            state = _emit(tracer, "mt_seed", (), {"seed": self.seed})
        drawn = _emit(state.tracer, "mt_uniform", (state,), {"shape": tuple(shape)})
        self._state = _emit(state.tracer, "mt_skip", (state,), {"count": math.prod(shape)})
        return drawn


def _emit(tracer: Tracer, op: str, operands: tuple[Tensor, ...], attrs: dict[str, Any]) -> Tensor:
    return Tensor(tracer, tracer.emit_op(op, tuple(t.var for t in operands), attrs, op))
