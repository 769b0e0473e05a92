"""The `lazyparams` command: help, exit codes, tables, JSON, IR stages and the demo."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lazyparams.cli import main
from lazyparams.cli.options import build_parser
from lazyparams.engine.journal import work_dir
from lazyparams.script import parse
from tests.engine.helpers import cli_env, read_all, run_cli, small_llama

COMMANDS = ("plan", "convert", "show", "demo")


@pytest.fixture(scope="module", name="src")
def src_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def test_help_for_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert all(command in text for command in COMMANDS) and "lazyparams demo" in text
    for command in COMMANDS:
        assert main([command, "--help"]) == 0
        assert f"usage: lazyparams {command}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["transmogrify"],
        ["plan", "cast"],
        ["plan", "cast", "src", "--budget", "12XB"],
        ["show", "cast", "src", "--stage", "raw"],
        ["convert", "cast", "src", "dst", "--workers", "0"],
        ["convert", "cast", "src", "dst", "--format", "onnx"],
        ["demo", "--layers", "-2"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: lazyparams" in capsys.readouterr().err


def test_plan_prints_a_table(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "fuse-qkv+cast:float16", str(src), "--budget", "4GiB"]) == 0
    out = capsys.readouterr().out
    for row in ("Plan: fuse-qkv+cast:float16", "reads", "writes", "eager peak", "predicted peak"):
        assert row in out
    assert "4.0 GiB: fits" in out


def test_plan_over_budget_says_why_and_exits_1(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "fuse-qkv", str(src), "--budget", "1KiB"]) == 1
    captured = capsys.readouterr()
    assert "does NOT fit" in captured.out
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: memory budget of 1024 bytes")
    # the binding where the budget breaks and the peak's binding name their tensors
    assert "(input 'model." in lines[0] and "(output 'model." in lines[0]
    assert "(output" in captured.out.split("predicted peak")[1]


@pytest.mark.parametrize("command", ["plan", "show", "convert"])
def test_swapped_spec_and_src_are_named_with_the_right_order(
    command: str, src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = [str(tmp_path / "out")] if command == "convert" else []
    assert main([command, str(src), "cast:float16", *dst]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cast:float16: no such file or folder, and SPEC")
    assert f"expected `lazyparams {command} cast:float16 {src} ...`" in err
    assert not (tmp_path / "out").exists()


def test_counts_take_the_number_of_their_noun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.npz"
    np.savez(one, w=np.ones((2, 2), np.float32))
    assert (
        main(["convert", "cast:float16", str(one), str(tmp_path / "out.npz"), "--no-progress"]) == 0
    )
    out = capsys.readouterr().out
    assert "(1 file)" in out and "1 tensor," in out
    assert "1 tensors" not in out and "1 files" not in out


def test_plan_as_json(src: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "cast", str(src), "--json", "--workers", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["workers"] == 2 and summary["fits"] is True
    assert summary["predicted_peak_bytes"] < summary["eager_peak_bytes"]


def test_convert_prints_a_report(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "out"
    argv = ["convert", "quantize-int8", str(src), str(dst), "--shard-size", "40KB"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    for row in ("Converted: quantize-int8", "measured peak (VM)", "peak RSS over start"):
        assert row in captured.out
    assert "write" in captured.err  # the progress bars
    assert len(read_all(dst)) > len(read_all(src))  # every weight got a scale
    assert main([*argv, "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: {dst}: already exists; expected a destination that does not exist (remove it "
        "or choose another)\n"
    )


def test_a_failed_conversion_points_at_resume(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "broken.py"
    spec.write_text(
        "from lazyparams.frontend import ops\n"
        "def _fail(x):\n"
        "    raise OSError(28, 'No space left on device')\n"
        "def transform(params):\n"
        "    k = ops.numpy_kernel(_fail, (2,), 'float32', name='fail')\n"
        "    return {'cast': params['model.norm.weight'].astype('float16'),\n"
        "            'fail': k(params['model.norm.weight'])}\n"
    )
    dst = tmp_path / "out"
    assert main(["convert", str(spec), str(src), str(dst), "--no-progress"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "error: [Errno 28] No space left on device"
    assert err[1] == (
        f"error: the partial output is kept in {work_dir(dst)}; rerun with --resume to "
        "continue, or without it to start over"
    )
    assert not dst.exists()


def test_user_errors_print_no_traceback(src: Path, tmp_path: Path) -> None:
    done = run_cli("convert", "cast:float17", src, tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: recipe 'cast': bad argument 'float17'")


STAGE_MARKERS = [("traced", "params["), ("scheduled", "params["), ("lazy", '"get_item"')]


@pytest.mark.parametrize(("stage", "marker"), STAGE_MARKERS)
def test_show_prints_each_stage_as_parsable_script(
    src: Path, capsys: pytest.CaptureFixture[str], stage: str, marker: str
) -> None:
    assert main(["show", "fuse-qkv", str(src), "--stage", stage]) == 0
    text = capsys.readouterr().out
    assert marker in text and "def transform_params(" in text
    parse(text)


def test_demo_runs_in_under_a_minute(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.monotonic()
    assert main(["demo", "--no-progress"]) == 0
    assert time.monotonic() - start < 60
    out = capsys.readouterr().out
    for row in ("eager peak", "predicted peak", "measured peak (VM)", "peak RSS over start"):
        assert row in out
    assert "Memory: eager vs lazy" in out


def test_python_dash_m_and_the_console_script(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("lazyparams ")
    script = shutil.which("lazyparams")
    if script is None:
        pytest.skip("the console script is not installed")
    installed = subprocess.run(
        [script, "plan", "--help"], env=cli_env(), capture_output=True, text=True, check=False
    )
    assert installed.returncode == 0 and "usage: lazyparams plan" in installed.stdout


def test_version_names_the_loops_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    from lazyparams.runtime import native

    with pytest.raises(SystemExit):
        build_parser(["--version"]).parse_args(["--version"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("lazyparams ") and len(lines) == 2
    if native.enabled():
        assert lines[1].startswith("kernels: compiled loops (")
    else:
        assert lines[1].startswith("kernels: numpy fallback (")


def test_version_without_the_compiled_loops(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lazyparams.runtime import native

    monkeypatch.setattr(native, "enabled", lambda: False)
    monkeypatch.setattr(native, "available", lambda: False)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "kernels: numpy fallback (compiled loops not built)"
    )


def test_version_imports_no_numpy_and_honours_lazyparams_native(tmp_path: Path) -> None:
    check = (
        "import sys; from lazyparams.cli import main; code = main(['--version']); "
        "assert 'numpy' not in sys.modules and 'lazyparams.runtime' not in sys.modules"
    )
    for env, expected in (({}, "kernels: "), ({"LAZYPARAMS_NATIVE": "0"}, "LAZYPARAMS_NATIVE=0")):
        done = subprocess.run(
            [sys.executable, "-c", check],
            env={**cli_env(), **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout.splitlines()[1]


@pytest.mark.parametrize(
    ("recipe", "warned"),
    [
        ("gguf:Q4_K_M", "about 35x"),
        ("gguf:q8_0", "about 10x"),
        ("quantize-int8", "int8 with numpy takes about 1.3x"),
        ("cast", ""),
    ],
)
def test_quantizing_without_the_compiled_loops_warns_with_the_cost(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, recipe: str, warned: str
) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    from lazyparams.runtime import native

    monkeypatch.setattr(native, "enabled", lambda: False)
    shape = ["--layers", "1", "--hidden", "128", "--intermediate", "256"]
    assert main(["demo", "--recipe", recipe, "--no-progress", *shape]) == 0
    err = capsys.readouterr().err
    if not warned:
        assert "warning" not in err
        return
    (line,) = err.splitlines()
    assert line.startswith("warning: the compiled loops are ") and warned in line
    assert "quantizing to " in line and "with numpy takes about" in line
