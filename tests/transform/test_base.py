"""The pass protocol: passes are callables on modules, Sequential chains them, inputs stay."""

from __future__ import annotations

import pytest

from lazyparams.errors import TransformError
from lazyparams.ir import structural_equal
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.transform import (
    DeadCodeElimination,
    KillAfterLastUse,
    LazyTransformParams,
    Pass,
    Sequential,
    ToNonDataflow,
)


@I.ir_module
class Module:
    @R.function
    def main_transform_params(params: R.Tuple(R.Tensor((2, 3), "float32"))):
        with R.dataflow():
            lv: R.Tensor((2, 3), "float32") = params[0]
            dead = R.add(lv, lv)
            lv1 = R.permute_dims(lv, axes=[1, 0])
            gv = (lv1,)
            R.output(gv)
        return gv


def test_sequential_applies_its_passes_in_order() -> None:
    passes: list[Pass] = [DeadCodeElimination(), LazyTransformParams(), KillAfterLastUse()]
    expected = Module
    for item in passes:
        expected = item(expected)
    assert structural_equal(Sequential(passes)(Module), expected, map_free_vars=True)
    assert Sequential([])(Module) is Module
    assert "Sequential([DeadCodeElimination(), LazyTransformParams()" in repr(Sequential(passes))


def test_passes_return_new_modules_and_leave_their_input_alone() -> None:
    text = Module.script()
    for item in (LazyTransformParams(), KillAfterLastUse(), ToNonDataflow(), DeadCodeElimination()):
        assert item(Module) is not Module
        assert Module.script() == text


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TransformError, match="LazyTransformParams: expected an IRModule, got dict"):
        LazyTransformParams()({})  # type: ignore[arg-type]
    with pytest.raises(TransformError, match="expected passes\\[1\\] to be a Pass, got int"):
        Sequential([ToNonDataflow(), 3])  # type: ignore[list-item]
    with pytest.raises(TransformError, match="expected a list of passes, got ToNonDataflow"):
        Sequential(ToNonDataflow())  # type: ignore[arg-type]
