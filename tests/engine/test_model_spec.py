"""A model module as SPEC: the engine lifts its weight-only work and runs it lazily, so the
output holds exactly the params the lifted model function is then called with."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import lazyparams
from lazyparams.errors import ConvertError
from lazyparams.ir import Function
from lazyparams.runtime import VirtualMachine
from lazyparams.script import ir as I
from lazyparams.script import relax as R
from lazyparams.script import tir as T
from lazyparams.transform import LiftTransformParams


@I.ir_module
class Model:
    @T.prim_func
    def scale(w: T.Buffer((4, 3), "float32"), out: T.Buffer((4, 3), "float32")):
        for i, j in T.grid(4, 3):
            with T.block("s"):
                vi, vj = T.axis.remap("SS", [i, j])
                out[vi, vj] = w[vi, vj] * T.float32(2)

    @R.function
    def main(
        x: R.Tensor((2, 3), "float32"),
        proj: R.Tensor((4, 3), "float32"),
        bias: R.Tensor(("n",), "float32"),
    ) -> R.Tensor((2, 4), "float32"):
        R.func_attr({"num_input": 1})
        cls = Model
        with R.dataflow():
            scaled = R.call_tir(cls.scale, (proj,), out_sinfo=R.Tensor((4, 3), "float32"))
            proj_t = R.permute_dims(scaled)
            y = R.matmul(x, proj_t)
            z = R.add(y, R.strided_slice(bias, axes=[0], begin=[0], end=[4]))
            R.output(z)
        return z


def _checkpoint(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    tensors = {
        "proj": rng.standard_normal((4, 3)).astype("float32"),
        "bias": rng.standard_normal((6,)).astype("float32"),
        "unused": np.zeros(3, "float32"),
    }
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    return path, tensors


def test_a_model_module_converts_to_the_params_its_lifted_model_takes(tmp_path: Path) -> None:
    src, tensors = _checkpoint(tmp_path)
    dst = tmp_path / "out.safetensors"
    lazyparams.convert(Model, src, dst)
    written = load_file(str(dst))
    assert list(written) == ["bias", "proj_t"]
    assert np.array_equal(written["proj_t"], (tensors["proj"] * 2).T)
    assert np.array_equal(written["bias"], tensors["bias"])
    lifted = LiftTransformParams()(Model)
    main = lifted["main"]
    assert isinstance(main, Function)
    assert [p.name_hint for p in main.params[1:]] == ["bias", "proj_t"]
    x = np.ones((2, 3), "float32")
    got = VirtualMachine(lifted)["main"](x, written["bias"], written["proj_t"])
    expected = VirtualMachine(Model)["main"](x, tensors["proj"], tensors["bias"])
    assert np.array_equal(got, expected)


def test_the_plan_of_a_model_module_reads_only_its_weights(tmp_path: Path) -> None:
    src, _ = _checkpoint(tmp_path)
    planned = lazyparams.plan(Model, src)
    assert [o.name for o in planned.outputs] == ["bias", "proj_t"]
    assert sorted(i.name for i in planned.inputs) == ["bias", "proj"]


def test_a_spec_file_may_name_a_model_module(tmp_path: Path) -> None:
    src, tensors = _checkpoint(tmp_path)
    spec = tmp_path / "model_spec.py"
    spec.write_text(
        textwrap.dedent(
            """
            from lazyparams.script import ir as I
            from lazyparams.script import relax as R

            @I.ir_module
            class Model:
                @R.function
                def main(x: R.Tensor((2, 3), "float32"), proj: R.Tensor((4, 3), "float32")):
                    R.func_attr({"num_input": 1})
                    with R.dataflow():
                        proj_t = R.permute_dims(proj)
                        y = R.matmul(x, proj_t)
                        R.output(y)
                    return y

            transform = Model
            """
        )
    )
    dst = tmp_path / "out.safetensors"
    lazyparams.convert(spec, src, dst)
    assert np.array_equal(load_file(str(dst))["proj_t"], tensors["proj"].T)


@I.ir_module
class WrongShape:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), proj: R.Tensor((3, 4), "float32")):
        R.func_attr({"num_input": 1})
        y = R.matmul(x, proj)
        return y


@I.ir_module
class Missing:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), wq: R.Tensor((4, 3), "float32")):
        R.func_attr({"num_input": 1})
        y = R.matmul(x, R.permute_dims(wq))
        return y


@I.ir_module
class NoWeights:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        y = R.add(x, x)
        return y


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (WrongShape, "weight 'proj': the model declares .*the checkpoint holds \\[4, 3\\] float32"),
        (Missing, "weight 'wq' is not in the checkpoint"),
        (NoWeights, "expected a public Relax function with a num_input attribute"),
    ],
)
def test_a_model_that_does_not_fit_the_checkpoint_is_refused_before_any_output(
    tmp_path: Path, module: object, expected: str
) -> None:
    src, _ = _checkpoint(tmp_path)
    dst = tmp_path / "out.safetensors"
    with pytest.raises(ConvertError, match=expected):
        lazyparams.convert(module, src, dst)
    assert list(tmp_path.iterdir()) == [src]


@I.ir_module
class NothingToLift:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), proj: R.Tensor((4, 3), "float32")):
        R.func_attr({"num_input": 1})
        y = R.matmul(x, R.permute_dims(proj))
        return y


def test_a_model_with_nothing_to_lift_copies_its_weights(tmp_path: Path) -> None:
    src, tensors = _checkpoint(tmp_path)
    dst = tmp_path / "out.safetensors"
    lazyparams.convert(NothingToLift, src, dst)
    written = load_file(str(dst))
    assert list(written) == ["proj"]
    assert np.array_equal(written["proj"], tensors["proj"])
