"""LiftTransformParams against TVM 0.27's own (the `tvm` extra), both ways: TVM's parser reads
our output printed in TVM's flavour, its `well_formed` passes, and the module is structurally
equal to what TVM's LiftTransformParams makes of the same Before; TVM's output as TVM prints it
parses here into ours. With and without `shared_transform`."""

from __future__ import annotations

from typing import Any

import pytest

from lazyparams.ir import IRModule, assert_structural_equal
from lazyparams.script.parser import parse
from lazyparams.transform import LiftTransformParams
from tests.transform.lift_scenarios import SCENARIOS
from tests.transform.test_lift_shared_transform import _pair

CASES: dict[str, IRModule] = {**SCENARIOS, "pair": _pair(), "pair_fused": _pair("fused")}
DIFFERENT = {"tuples": "TVM also folds tuple-of-weight chains into direct loads"}
"""Scenarios where TVM's output differs from ours in form, not in what it computes."""


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* and R.builtin.* with the parser
    return tvm


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("scenario", sorted(CASES))
def test_our_lift_reads_back_in_tvm_as_its_own_lift(scenario: str, shared: bool) -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    before = CASES[scenario]
    ours = from_source(LiftTransformParams(shared_transform=shared)(before).script(flavor="tvm"))
    relax.analysis.well_formed(ours)
    if scenario in DIFFERENT:
        return
    theirs = relax.transform.LiftTransformParams(shared_transform=shared)(
        from_source(before.script(flavor="tvm"))
    )
    tvm.ir.assert_structural_equal(ours, theirs)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("scenario", sorted(set(CASES) - set(DIFFERENT)))
def test_tvm_s_lift_printed_by_tvm_parses_as_ours(scenario: str, shared: bool) -> None:
    _tvm()
    from tvm import relax
    from tvm.script import from_source

    before = CASES[scenario]
    theirs = relax.transform.LiftTransformParams(shared_transform=shared)(
        from_source(before.script(flavor="tvm"))
    )
    ours = LiftTransformParams(shared_transform=shared)(before)
    assert_structural_equal(parse(theirs.script()), ours, map_free_vars=True)
