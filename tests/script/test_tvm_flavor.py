"""`mod.script(flavor="tvm")`: TVM 0.27's spelling, which lazyparams reads back too; with
apache-tvm installed, the round trip both ways: TVM prints, lazyparams parses, makes lazy and
prints in TVM's flavour, TVM parses it, its `well_formed` passes and its VM run gives the
values lazyparams' VM gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lazyparams.errors import LazyParamsError
from lazyparams.ir import assert_structural_equal
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import parse
from lazyparams.script import tir as T
from lazyparams.transform import LazyTransformParams
from tests.script.seed_modules import Before as SeedBefore
from tests.script.test_tvm_spelling import TVM_SEED

STRICT = LazyTransformParams(strict=True)


def test_the_tvm_flavour_spells_what_tvm_reads_and_reads_back_equal() -> None:
    lazy = STRICT(SeedBefore)
    text = lazy.script(flavor="tvm")
    assert text.startswith("# from tvm.script import ir as I, relax as R, tirx as T")
    for spelling in ("@T.prim_func(s_tir=True)", "T.sblock(", "out_ty=", "ty_args=(R.Any,)"):
        assert spelling in text
    for seed_only in ("T.block(", "out_sinfo=", "sinfo_args=", "R.Object"):
        assert seed_only not in text
    assert_structural_equal(parse(text), lazy)
    assert lazy.script() == str(lazy)  # the seed's spelling stays the default


def test_the_tvm_flavour_leaves_out_empty_regions() -> None:
    @I.ir_module
    class Module:
        @T.prim_func
        def fill(out: T.Buffer((4,), "float32")):
            for i in T.grid(4):
                with T.block("fill"):
                    vi = T.axis.remap("S", [i])
                    T.reads()
                    T.writes(out[vi])
                    out[vi] = T.float32(1)

    assert "T.reads()" in Module.script()
    text = Module.script(flavor="tvm")
    assert "T.reads()" not in text and "T.writes(out[vi])" in text
    assert_structural_equal(parse(text), Module)


def test_an_unknown_flavour_is_refused() -> None:
    with pytest.raises(LazyParamsError, match="expected flavor 'lazyparams' or 'tvm', got 'x'"):
        SeedBefore.script(flavor="x")


def _our_outputs(mod: Any, weights: list[np.ndarray[Any, Any]]) -> dict[int, Any]:
    outputs: dict[int, Any] = {}
    externs = {"get_item": lambda i: weights[int(i)], "set_item": outputs.__setitem__}
    VirtualMachine(mod, externs)["main_transform_params"]()
    return outputs


def _tvm_outputs(tvm: Any, mod: Any, weights: list[np.ndarray[Any, Any]]) -> dict[int, Any]:
    from tvm import relax

    outputs: dict[int, Any] = {}
    tvm.register_global_func(
        "get_item", lambda i: tvm.runtime.tensor(weights[int(i)]), override=True
    )
    tvm.register_global_func(
        "set_item", lambda i, v: outputs.__setitem__(int(i), v.numpy()), override=True
    )
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    vm["main_transform_params"]()
    return outputs


def test_round_trip_through_tvm() -> None:
    tvm = pytest.importorskip("tvm", reason="the round trip needs the `tvm` extra (apache-tvm)")
    pytest.importorskip("tvm.relax.op.vm")  # registers R.vm.* with TVM's parser
    from tvm import relax
    from tvm.script import from_source

    printed_by_tvm = from_source(TVM_SEED).script()
    ours = STRICT(parse(printed_by_tvm))
    theirs = from_source(ours.script(flavor="tvm"))
    relax.analysis.well_formed(theirs)  # raises on the first violation
    rng = np.random.default_rng(0)
    weights = [rng.random((3, 16, 3, 3), "float32"), rng.random((16, 16, 3, 3), "float32")]
    expected = _our_outputs(ours, weights)
    got = _tvm_outputs(tvm, theirs, weights)
    assert sorted(got) == sorted(expected) == [0, 1]
    for index, value in expected.items():
        np.testing.assert_array_equal(got[index], value)
