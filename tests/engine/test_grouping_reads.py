"""The grouping's direct reading of a step's operands agrees with the liveness visitor."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lazyparams.analysis.liveness import used_vars
from lazyparams.engine.compile import function_of
from lazyparams.engine.grouping import _vars_read
from lazyparams.frontend import Tensor, ops, trace

INPUTS = {"a": ((4, 6), "float32"), "b": ((4, 6), "float32"), "c": ((6,), "float32")}


def _mixed(params: Mapping[str, Tensor]) -> dict[str, Any]:
    a, b, c = params["a"], params["b"], params["c"]
    joined = ops.concat([a, b, a], axis=0)
    return {
        "stack": ops.stack([a, b, a]),
        "sum": a + c,
        "scaled": b * np.float32(2),
        "halves": ops.split(joined, 2)[1],
        "t": joined.T,
    }


def test_every_step_reads_the_vars_the_visitor_finds_in_the_same_order() -> None:
    func = function_of(trace(_mixed, INPUTS))
    bindings = func.bindings()
    assert len(bindings) > 10
    for binding in bindings:
        assert _vars_read(binding.value) == used_vars(binding.value)
