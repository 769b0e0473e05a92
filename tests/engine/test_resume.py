"""Interrupted conversions: nothing at DST, a journal beside it, and `--resume` to finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert
from lazyparams.engine.dst_lock import lock_path
from lazyparams.engine.journal import JOURNAL_FILE, work_dir
from lazyparams.engine.output import StagedSafetensors
from lazyparams.errors import ConvertError
from tests.engine.helpers import cli_env, read_all, run_cli, slow_spec, small_llama, tree_bytes

FLAKY = """
import os
from lazyparams.frontend import ops

CALLS = []


def _copy(x):
    CALLS.append(x.shape)
    if len(CALLS) > {after} and os.path.exists({marker!r}):
        raise RuntimeError("the disk caught fire")
    return x.copy()


def transform(params):
    out = {{}}
    for name, value in params.items():
        copy = ops.numpy_kernel(_copy, value.shape, value.dtype, name="copy")
        out[name] = copy(value).astype("float16")
    return out
"""


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def journal_names(dst: Path) -> list[str]:
    path = work_dir(dst) / JOURNAL_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().split(b"\n")[:-1]]


def flaky_spec(folder: Path, after: int) -> tuple[Path, Path]:
    """A spec that fails after `after` tensors while its marker file exists."""
    marker = folder / "fail"
    marker.touch()
    spec = folder / "flaky.py"
    spec.write_text(FLAKY.format(after=after, marker=str(marker)))
    return spec, marker


def test_a_failed_run_resumes_to_the_same_bytes(llama_path: Path, tmp_path: Path) -> None:
    spec, marker = flaky_spec(tmp_path, after=6)
    dst = tmp_path / "out"
    with pytest.raises(RuntimeError, match="the disk caught fire"):
        convert(str(spec), llama_path, dst, shard_size=40_000, progress=False)
    assert not dst.exists()
    done = journal_names(dst)
    assert 1 <= len(done) <= 6
    marker.unlink()
    report = convert(str(spec), llama_path, dst, shard_size=40_000, progress=False, resume=True)
    total = len(read_all(llama_path))
    assert report.resumed_outputs == len(done)
    assert report.tensors_written == total - len(done)
    assert report.tensors_read == total - len(done)  # only the missing outputs' inputs
    assert {info.name for info in report.plan.outputs}.isdisjoint(done)
    convert(str(spec), llama_path, tmp_path / "whole", shard_size=40_000, progress=False)
    assert tree_bytes(dst) == tree_bytes(tmp_path / "whole")
    assert not work_dir(dst).exists()


def test_without_resume_a_new_run_starts_over(llama_path: Path, tmp_path: Path) -> None:
    spec, _ = flaky_spec(tmp_path, after=3)
    dst = tmp_path / "out"
    with pytest.raises(RuntimeError):
        convert(str(spec), llama_path, dst, progress=False)
    assert work_dir(dst).exists() and not dst.exists()
    report = convert("cast:float16", llama_path, dst, progress=False)
    assert report.discarded_partial and report.resumed_outputs == 0
    assert report.tensors_written == len(read_all(llama_path))
    assert not work_dir(dst).exists()


def test_resume_refuses_the_work_of_another_job(llama_path: Path, tmp_path: Path) -> None:
    spec, _ = flaky_spec(tmp_path, after=3)
    dst = tmp_path / "out"
    with pytest.raises(RuntimeError):
        convert(str(spec), llama_path, dst, progress=False)
    before = tree_bytes(work_dir(dst))
    with pytest.raises(ConvertError) as err:
        convert("cast:bfloat16", llama_path, dst, progress=False, resume=True)
    assert "had a different transform; expected the same transform, source and options" in str(
        err.value
    )
    with pytest.raises(ConvertError, match="had a different shard_size"):
        convert(str(spec), llama_path, dst, progress=False, resume=True, shard_size="1MiB")
    assert tree_bytes(work_dir(dst)) == before and not dst.exists()


def test_a_journal_line_cut_short_is_not_a_record(llama_path: Path, tmp_path: Path) -> None:
    spec, marker = flaky_spec(tmp_path, after=4)
    dst = tmp_path / "out.safetensors"
    with pytest.raises(RuntimeError):
        convert(str(spec), llama_path, dst, progress=False)
    done = journal_names(dst)
    with open(work_dir(dst) / JOURNAL_FILE, "ab") as journal:
        journal.write(b'"model.norm.wei')  # a kill in the middle of a record
    marker.unlink()
    report = convert(str(spec), llama_path, dst, progress=False, resume=True)
    assert report.resumed_outputs == len(done)
    convert(str(spec), llama_path, tmp_path / "whole.safetensors", progress=False)
    assert dst.read_bytes() == (tmp_path / "whole.safetensors").read_bytes()


def test_resume_after_the_last_output_only_publishes(
    llama_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dst = tmp_path / "out"

    def interrupted(self: StagedSafetensors) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(StagedSafetensors, "finalize", interrupted)
        with pytest.raises(KeyboardInterrupt):
            convert("cast", llama_path, dst, progress=False)
    assert not dst.exists()
    report = convert("cast", llama_path, dst, progress=False, resume=True)
    assert report.tensors_read == report.tensors_written == 0
    assert report.resumed_outputs == len(read_all(llama_path))
    assert report.measured_peak_bytes is None
    assert all(v.dtype == np.float16 for v in read_all(dst).values())


def test_resume_without_an_interrupted_run_converts_everything(
    llama_path: Path, tmp_path: Path
) -> None:
    report = convert("cast", llama_path, tmp_path / "out", progress=False, resume=True)
    assert report.resumed_outputs == 0 and report.tensors_written == len(read_all(llama_path))


def test_a_damaged_work_folder_is_refused_on_resume(llama_path: Path, tmp_path: Path) -> None:
    spec, _ = flaky_spec(tmp_path, after=3)
    dst = tmp_path / "out"
    with pytest.raises(RuntimeError):
        convert(str(spec), llama_path, dst, progress=False)
    shard = next((work_dir(dst) / "data").iterdir())
    with open(shard, "r+b") as fp:
        fp.truncate(100)
    with pytest.raises(ConvertError, match=r"shard is damaged; expected .* bytes starting with"):
        convert(str(spec), llama_path, dst, progress=False, resume=True)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks")
def test_two_conversions_never_write_one_destination(llama_path: Path, tmp_path: Path) -> None:
    import fcntl

    dst = tmp_path / "out"
    work_dir(dst).mkdir()
    with open(work_dir(dst) / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(ConvertError, match="another conversion is writing this output"):
            convert("cast", llama_path, dst, progress=False)
    assert not dst.exists()


# A real kill -----------------------------------------------------------------------------------


def start_slow_conversion(spec: Path, src: Path, dst: Path, cwd: Path) -> subprocess.Popen[str]:
    args = ["convert", spec, src, dst, "--shard-size", "40000", "--no-progress"]
    command = [sys.executable, "-m", "lazyparams", *map(str, args)]
    pipe = subprocess.PIPE
    return subprocess.Popen(command, cwd=cwd, env=cli_env(), stdout=pipe, stderr=pipe, text=True)


def kill_after(process: subprocess.Popen[str], dst: Path, entries: int) -> None:
    """SIGKILL `process` as soon as its journal records `entries` outputs."""
    deadline = time.monotonic() + 60
    while len(journal_names(dst)) < entries:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the conversion never got half way"
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_half_way_then_resume_gives_identical_bytes(
    llama_path: Path, tmp_path: Path
) -> None:
    dst = tmp_path / "out"
    process = start_slow_conversion(slow_spec(tmp_path, 0.05), llama_path, dst, tmp_path)
    total = len(read_all(llama_path))
    kill_after(process, dst, total // 2)
    assert not dst.exists()
    done = journal_names(dst)
    assert total // 2 <= len(done) < total
    options = ["--shard-size", "40000", "--resume", "--json", "--no-progress"]
    resumed = run_cli("convert", tmp_path / "slow_spec.py", llama_path, dst, *options, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["resumed_outputs"] == len(done)
    assert report["tensors_read"] == total - len(done)
    reference = tmp_path / "reference"
    reference.mkdir()
    fast = slow_spec(reference, 0.0)  # the same transform, without the wait
    convert(str(fast), llama_path, reference / "out", shard_size=40_000, progress=False)
    assert tree_bytes(dst) == tree_bytes(reference / "out")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_without_resume_leaves_nothing_at_dst(llama_path: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out"
    process = start_slow_conversion(slow_spec(tmp_path, 0.05), llama_path, dst, tmp_path)
    kill_after(process, dst, 3)
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        lock_path(dst).name,  # a killed run's lock file: the next run reuses and removes it
        work_dir(dst).name,
        "slow_spec.py",
    ]
    again = run_cli("convert", "cast", llama_path, dst, "--no-progress", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "partial output was discarded" in again.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "slow_spec.py"]
