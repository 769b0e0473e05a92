"""The shortcuts that let a model's worth of tensors trace fast bind what the plain paths bind."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from lazyparams.errors import TraceError
from lazyparams.frontend import Tensor, ops, trace
from lazyparams.frontend.tracer import identifier
from lazyparams.frontend.tracing import collection_paused
from lazyparams.ir import assert_structural_equal

INPUTS = {f"e.{i}.w": ((3, 5), "float16") for i in range(4)}
INPUTS["odd"] = ((3, 5), "float32")


def _stacked(params: Mapping[str, Tensor]) -> dict[str, Any]:
    members = [params[f"e.{i}.w"] for i in range(4)]
    return {"s0": ops.stack(members, axis=0), "s2": ops.stack(members[:2], axis=-1)}


def _by_hand(params: Mapping[str, Tensor]) -> dict[str, Any]:
    members = [params[f"e.{i}.w"] for i in range(4)]
    first = ops.concat([ops.expand_dims(m, 0) for m in members], axis=0)
    last = ops.concat([ops.expand_dims(m, 2) for m in members[:2]], axis=2)
    return {"s0": first, "s2": last}


def test_stack_binds_what_expand_dims_then_concat_bind() -> None:
    stacked, by_hand = trace(_stacked, INPUTS), trace(_by_hand, INPUTS)
    assert_structural_equal(stacked, by_hand)
    assert stacked.script() == by_hand.script()  # var names too


def test_stack_of_mixed_dtypes_is_refused_at_the_users_line() -> None:
    def mixed(params: Mapping[str, Tensor]) -> dict[str, Any]:
        return {"s": ops.stack([params["e.0.w"], params["odd"]])}

    with pytest.raises(TraceError, match=r"test_trace_at_scale\.py.*one dtype"):
        trace(mixed, INPUTS)


def _identifier_by_substitution(name: str) -> str:
    """What `identifier` computed before its shortcut, as the reference."""
    text = re.sub(r"\W+", "_", name).strip("_")
    if not text:
        return "w"
    if text in {"class", "if", "def", "None"}:
        return f"{text}_"
    return f"w_{text}" if text[0].isdigit() else text


@pytest.mark.parametrize(
    "name",
    [
        "model.layers.0.mlp.experts.17.gate_proj.weight",
        "lm_head.weight",
        "a..b",
        ".a.",
        "_a._b_",
        "0.x",
        "x.class",
        "if.",
        "a-b.c",
        "é.x",
        "...",
        "",
        "_1a.b",
    ],
)
def test_identifiers_of_names_are_those_of_the_substitution(name: str) -> None:
    assert identifier(name) == _identifier_by_substitution(name)


def test_inputs_with_negative_or_non_int_dims_are_still_refused() -> None:
    class Info:
        def __init__(self, shape: tuple[Any, ...]) -> None:
            self.shape, self.dtype = shape, "float32"

    class Source:
        def __init__(self, shape: tuple[Any, ...]) -> None:
            self.shape = shape

        def names(self) -> list[str]:
            return ["w"]

        def info(self, name: str) -> Info:
            return Info(self.shape)

    with pytest.raises(TraceError, match="non-negative ints"):
        trace(lambda p: {"w": p["w"]}, Source((3, -1)))
    with pytest.raises(TraceError, match="non-negative ints"):
        trace(lambda p: {"w": p["w"]}, Source((3, 1.5)))
    traced = trace(lambda p: {"w": p["w"]}, Source((3, np.int64(2))))
    assert "R.Tensor((3, 2)" in traced.script()


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    import gc

    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
