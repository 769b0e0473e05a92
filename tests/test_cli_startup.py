"""Start-up of the `lazyparams` command: what `--version`, `--help` and `plan` import.

Each check runs in a fresh interpreter, since this one has imported everything already. The
public names must still import from where they always did, loaded on first use.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import lazyparams
from lazyparams.io import TensorInfo
from lazyparams.io.safetensors_format import build_header
from tests.engine.helpers import ROOT, cli_env

# the libraries a command that does not read or write tensors must not pay for
HEAVY = ("ml_dtypes", "rich", "gguf", "safetensors", "numpy", "torch")

_IMPORTED_AFTER = """
import contextlib, io, json, sys
from lazyparams.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    codes = [main(argv) for argv in json.loads(sys.argv[1])]
top = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"codes": codes, "modules": top, "all": sorted(sys.modules), "out": out.getvalue()}))
"""


def _imported_after(*argvs: list[str]) -> dict[str, list[str]]:
    """Run the command lines `argvs` in one fresh interpreter; their exit codes and imports."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_AFTER, json.dumps(argvs)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


def test_version_and_help_import_no_heavy_library() -> None:
    result = _imported_after(["--version"], ["--help"])
    assert result["codes"] == [0, 0]
    assert [name for name in HEAVY if name in result["modules"]] == []
    assert [name for name in result["all"] if name.startswith("lazyparams.")] == [
        "lazyparams.cli",
        "lazyparams.cli.kernels",  # --version names the loops in use, without the runtime
        "lazyparams.cli.options",
        "lazyparams.errors",
    ]


def _header_only_bf16(path: Path) -> Path:
    """A safetensors file of two bfloat16 projections whose data is never written."""
    infos = [
        TensorInfo.of("model.layers.0.self_attn.q_proj.weight", (64, 64), "bfloat16"),
        TensorInfo.of("model.layers.0.mlp.up_proj.weight", (128, 64), "bfloat16"),
    ]
    header, _ = build_header(infos, path=str(path))
    with open(path, "wb") as fp:
        fp.write(header)
        fp.truncate(len(header) + sum(info.nbytes for info in infos))
    return path


def test_plan_of_a_safetensors_checkpoint_needs_neither_ml_dtypes_nor_other_formats(
    tmp_path: Path,
) -> None:
    src = _header_only_bf16(tmp_path / "model.safetensors")
    result = _imported_after(["plan", "cast:float16", str(src), "--json"])
    assert result["codes"] == [0]
    for name in ("ml_dtypes", "gguf", "safetensors", "torch"):
        assert name not in result["modules"], name
    formats = {"lazyparams.io.gguf_format", "lazyparams.io.torch_source", "lazyparams.runtime"}
    assert formats.isdisjoint(result["all"])


# what planning a recipe over a safetensors checkpoint never runs: numpy (no tensor is read),
# the TIR and the checks of it, the passes the plan does not run, the script printer
NOT_FOR_PLAN = (
    "numpy",
    "lazyparams.tir",
    "lazyparams.analysis.well_formed",
    "lazyparams.transform.lift_transform_params",
    "lazyparams.transform.lazy_get_input",
    "lazyparams.script",
)


def test_plan_of_a_safetensors_checkpoint_imports_neither_numpy_nor_the_tir(
    tmp_path: Path,
) -> None:
    src = _header_only_bf16(tmp_path / "model.safetensors")
    result = _imported_after(
        ["plan", "cast:float16", str(src), "--json"], ["plan", "cast:float16", str(src)]
    )
    assert result["codes"] == [0, 0]
    assert [name for name in NOT_FOR_PLAN if name in result["all"]] == []


def test_the_names_made_lazy_still_import_from_their_packages() -> None:
    code = (
        "from lazyparams.analysis import liveness, well_formed, estimate_peak_memory\n"
        "from lazyparams.transform import LiftTransformParams, LazyTransformParams\n"
        "import lazyparams.analysis.liveness, lazyparams.analysis.well_formed, lazyparams.analysis\n"
        "print(callable(lazyparams.analysis.liveness), callable(lazyparams.analysis.well_formed))\n"
        "print(sorted(set(lazyparams.analysis.__all__) - set(dir(lazyparams.analysis))))\n"
        "print(sorted(set(lazyparams.transform.__all__) - set(dir(lazyparams.transform))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[:3] == ["True True", "[]", "[]"]


def test_an_unknown_command_is_still_refused_with_the_list_of_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lazyparams.cli import main

    assert main(["transmogrify"]) == 2
    assert "plan" in capsys.readouterr().err


_PUBLIC_NAMES = """
import lazyparams, lazyparams.io, lazyparams.engine
from lazyparams import convert, ops, plan, trace
from lazyparams.engine import Plan, Report, RECIPE_NAMES, format_bytes, parse_size
import lazyparams.engine.plan, lazyparams.engine.convert
assert lazyparams.engine.plan is plan and lazyparams.engine.convert is convert, "functions"
assert callable(lazyparams.plan) and callable(lazyparams.convert)
names = [getattr(lazyparams.io, name) for name in lazyparams.io.__all__]
names += [getattr(lazyparams.engine, name) for name in lazyparams.engine.__all__]
assert sorted(set(dir(lazyparams.io)) & set(lazyparams.io.__all__)) == sorted(lazyparams.io.__all__)
mod = trace(lambda p: {"y": ops.astype(p["x"], "float16")}, {"x": ((2, 3), "float32")})
assert "R.astype" in mod.script(), "the printer loads on first use"
assert lazyparams.script.parse(mod.script()) is not None
print("ok")
"""


def test_public_names_import_from_where_they_always_did() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PUBLIC_NAMES],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_an_op_is_found_by_name_once_the_op_layer_registered_it() -> None:
    code = (
        "from lazyparams.errors import StructInfoError\n"
        "from lazyparams.ir.op_registry import get_op, op_info\n"
        "try:\n"
        "    get_op('permute_dims')\n"
        "except StructInfoError as error:\n"
        "    print(error)\n"
        "import lazyparams.op\n"
        "print(get_op('permute_dims').name, op_info('concat').name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "unknown op R.permute_dims; no op is registered: import lazyparams.op",
        "permute_dims concat",
    ]


def test_the_version_printed_is_the_one_the_project_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert lazyparams.__version__ == declared
