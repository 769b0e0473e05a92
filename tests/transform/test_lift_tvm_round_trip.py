"""LiftTransformParams against TVM 0.27's own (the `tvm` extra), both ways, on every scenario of
TVM's test_transform_lift_transform_params.py that both can express (`lift_scenarios*`): TVM
prints the Before, it is read here and lifted, TVM's parser reads the result printed in TVM's
flavour, its `well_formed` passes, and the module is structurally equal to what TVM's
LiftTransformParams makes of the same Before, with and without `shared_transform` and
`consume_params`; TVM's output as TVM prints it parses here into ours.

Where TVM 0.27 behaves otherwise by a defect or a limitation of its own, ours is kept and the
case is listed in `DIFFERENT` with the reason (its output still parses and is well formed in TVM).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from lazyparams.errors import TransformError
from lazyparams.ir import IRModule, assert_structural_equal
from lazyparams.script.parser import parse
from lazyparams.transform import LiftTransformParams
from tests.transform.lift_scenarios import SCENARIOS
from tests.transform.lift_scenarios_shared import SHARED_SCENARIOS
from tests.transform.test_lift_shared_transform import _pair, _with_second

SINGLE: dict[str, IRModule] = {**SCENARIOS, "pair": _pair(), "pair_fused": _pair("fused")}
INCOMPATIBLE = {f"incompatible_{kind}": _with_second(kind) for kind in ("count", "shape", "dtype")}
"""TVM's test_incompatible_*: functions whose weights differ may each have a transform, and
neither side lets them share one."""
CASES: list[tuple[str, Any]] = [(name, shared) for name in SINGLE for shared in (False, True)]
CASES += [(name, False) for name in INCOMPATIBLE]
CASES += [(name, False) for name in SHARED_SCENARIOS]
CASES += [(name, shared) for name, (_, shared) in SHARED_SCENARIOS.items() if shared]

TUPLE_LOADS = (
    "TVM loads params[0] twice, once per output its folded tuple chain leaves (test_tuple's "
    "Expected has both loads); every input is loaded once here"
)
PRODUCT_DIM = (
    'TVM keeps R.Tensor(("m * n",)) in the transform\'s signature, naming dims nothing in the '
    "transform defines (its own test of the wanted form is marked xfail); here that shape is "
    "erased to its rank"
)
OUTSIDE_DATAFLOW = (
    "TVM lifts only bindings inside dataflow blocks; a pure binding outside one lifts here "
    "(the VM runs the lifted pair alike), so its lift of this module lifts nothing"
)
DIFFERENT: dict[tuple[str, bool], str] = {
    ("lora_outside_dataflow", False): OUTSIDE_DATAFLOW,
    ("lora_outside_dataflow", True): OUTSIDE_DATAFLOW,
    ("incompatible_shape", False): OUTSIDE_DATAFLOW,
    ("incompatible_dtype", False): OUTSIDE_DATAFLOW,
    ("tuples", False): TUPLE_LOADS,
    ("tuples", True): TUPLE_LOADS,
    ("product_dim", False): PRODUCT_DIM,
    ("product_dim", True): PRODUCT_DIM,
    ("param_shape", True): (
        "TVM's shared transform lifts nothing whose struct info has a symbolic dim (its shared "
        "mode does not count the weights' dims among the known ones); such values lift here, "
        "and the VM checks their dims when the transform runs"
    ),
}
"""(scenario, shared) -> why TVM's output differs from ours in form, not in what it computes."""

REFUSED = {
    ("shape_weight", True): "needs the symbolic dims slice_index at run time",
}
"""(scenario, shared) -> the refusal: a dim only the weights define cannot be shared."""


def _tvm() -> Any:
    tvm = pytest.importorskip("tvm", reason="the comparison needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* and R.builtin.* with the parser
    return tvm


def _before(name: str) -> IRModule:
    if name in INCOMPATIBLE:
        return INCOMPATIBLE[name]
    return SINGLE[name] if name in SINGLE else SHARED_SCENARIOS[name][0]


def _key(shared: Any) -> bool:
    return shared is not False


def _as_tvm_prints_it(before: IRModule) -> IRModule:
    """`before` printed in TVM's flavour, read by TVM, printed by TVM and read here: TVM's
    parser gives each nested call a binding of its own, as this parser does not."""
    _tvm()
    from tvm.script import from_source

    return parse(from_source(before.script(flavor="tvm")).script())


def _tvm_lift(before: IRModule, shared: Any, consume: bool) -> Any:
    """TVM's LiftTransformParams on `before` printed in TVM's flavour and read by TVM."""
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    config = {"relax.lift_transform_params.consume_params": consume}
    with tvm.transform.PassContext(config=config):
        return relax.transform.LiftTransformParams(shared_transform=shared)(
            from_source(before.script(flavor="tvm"))
        )


@pytest.mark.parametrize("consume", [False, True])
@pytest.mark.parametrize(("scenario", "shared"), CASES)
def test_our_lift_reads_back_in_tvm_as_its_own_lift(
    scenario: str, shared: Any, consume: bool
) -> None:
    tvm = _tvm()
    from tvm import relax
    from tvm.script import from_source

    lift = LiftTransformParams(shared_transform=shared, consume_params=consume)
    if (scenario, _key(shared)) in REFUSED:
        with pytest.raises(TransformError, match=REFUSED[(scenario, _key(shared))]):
            lift(_before(scenario))
        return
    ours = from_source(lift(_as_tvm_prints_it(_before(scenario))).script(flavor="tvm"))
    relax.analysis.well_formed(ours)
    if (scenario, _key(shared)) in DIFFERENT:
        return
    tvm.ir.assert_structural_equal(ours, _tvm_lift(_before(scenario), shared, consume))


@pytest.mark.parametrize("consume", [False, True])
@pytest.mark.parametrize(
    ("scenario", "shared"),
    [c for c in CASES if (c[0], _key(c[1])) not in {**DIFFERENT, **REFUSED}],
)
def test_tvm_s_lift_printed_by_tvm_parses_as_ours(
    scenario: str, shared: Any, consume: bool
) -> None:
    theirs = _tvm_lift(_before(scenario), shared, consume)
    lift = LiftTransformParams(shared_transform=shared, consume_params=consume)
    ours = lift(_as_tvm_prints_it(_before(scenario)))
    # TVM prints the int32 slot index of tuple_reset_item as a bare int, which reads back (in
    # TVM as here) as int64: its own text does not round-trip; compare with that reading
    as_printed = re.sub(r"R\.prim_value\(T\.int32\((\d+)\)\)", r"R.prim_value(\1)", ours.script())
    assert_structural_equal(parse(theirs.script()), parse(as_printed), map_free_vars=True)


def test_tvm_s_own_text_of_a_consuming_lift_loses_the_index_dtype() -> None:
    """The TVM defect the comparison above works around, shown: TVM's printed consume_params
    output read back by TVM differs from the module it printed."""
    tvm = _tvm()
    from tvm.script import from_source

    theirs = _tvm_lift(SCENARIOS["barrier"], False, True)
    with pytest.raises(ValueError, match="dtype"):
        tvm.ir.assert_structural_equal(from_source(theirs.script()), theirs)


@pytest.mark.parametrize("scenario", sorted(INCOMPATIBLE))
def test_functions_with_different_weights_share_a_transform_on_neither_side(scenario: str) -> None:
    _tvm()
    with pytest.raises(TransformError, match=r"shared_transform: .*expected"):
        LiftTransformParams(shared_transform=True)(INCOMPATIBLE[scenario])
    with pytest.raises(Exception, match="should be the same for all target functions"):
        _tvm_lift(INCOMPATIBLE[scenario], True, False)
