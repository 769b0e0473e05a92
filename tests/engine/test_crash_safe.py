"""Every output format killed (SIGKILL, SIGTERM) at several points, then resumed to the bytes
of an uninterrupted run; the destination lock; write errors naming the tensor and the file."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import lazyparams.engine.staged as staged
from lazyparams.engine import convert
from lazyparams.engine.dst_lock import DestinationLock, lock_path
from lazyparams.engine.journal import work_dir
from lazyparams.errors import CheckpointError, ConvertError
from tests.engine.helpers import cli_env, small_llama, tree_bytes

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

# Runs the CLI with a signal sent to itself at the Nth data write or the Nth publishing rename
# (or, with the action "wait", a pause there), journaling every tensor at once.
DRIVER = """
import os, signal, sys, time
import lazyparams.engine.output as output
import lazyparams.engine.staged as staged
from lazyparams import cli

point, count, action = sys.argv[1], int(sys.argv[2]), sys.argv[3]
calls = [0]
staged.JOURNAL_SECONDS = output.JOURNAL_SECONDS = 0.0


def hit():
    calls[0] += 1
    if calls[0] == count:
        if action == "wait":  # until the test says go (a file beside the run's folder)
            deadline = time.monotonic() + 60
            while not os.path.exists("../go") and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            os.kill(os.getpid(), getattr(signal, action))


if point == "write":
    for module in (staged, output):
        def patched(fd, array, offset, real=module.write_array_at):
            hit()
            real(fd, array, offset)
        module.write_array_at = patched
else:
    real_rename = os.rename

    def rename(a, b):
        real_rename(a, b)
        hit()

    os.rename = rename
sys.exit(cli.main(sys.argv[4:]))
"""

FORMATS = {
    "npz": ("out.npz", []),
    "npy": ("out", ["--format", "npy"]),
    "gguf": ("out.gguf", []),
    "split-gguf": ("out.gguf", ["--shard-size", "40000"]),
    "safetensors": ("out", ["--shard-size", "40000"]),
    "pytorch": ("pytorch_model.bin", []),
}


@pytest.fixture(scope="module", name="llama")
def llama_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


@pytest.fixture(scope="module", name="references")
def references_fixture(llama: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each format converted once without interruption: the bytes every resume must give."""
    out: dict[str, Any] = {}
    for key, (name, _) in FORMATS.items():
        folder = tmp_path_factory.mktemp(key)
        shard = 40000 if key in ("split-gguf", "safetensors") else None
        fmt = "npy" if key == "npy" else None
        convert("cast:float16", llama, folder / name, shard_size=shard, format=fmt, progress=False)
        out[key] = tree_bytes(folder)
    return out


def drive(folder: Path, point: str, count: int, action: str, *args: str | Path) -> Any:
    driver = folder.parent / f"{folder.name}-{point}-{count}-{action}.py"
    driver.write_text(DRIVER)
    command = [sys.executable, str(driver), point, str(count), action, "convert", *map(str, args)]
    return subprocess.Popen(
        command, cwd=folder, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def outputs(folder: Path) -> dict[str, bytes]:
    return tree_bytes(folder)


CASES = [
    *((key, "write", 3, "SIGKILL") for key in FORMATS),
    *((key, "write", 9 if key in ("npz", "split-gguf") else 5, "SIGTERM") for key in FORMATS),
    ("safetensors", "write", 5, "SIGINT"),
    ("split-gguf", "publish", 2, "SIGKILL"),
    ("npy", "publish", 1, "SIGKILL"),
]


@pytest.mark.parametrize(("key", "point", "count", "action"), CASES)
def test_killed_then_resumed_gives_the_bytes_of_an_uninterrupted_run(
    llama: Path,
    references: dict[str, Any],
    tmp_path: Path,
    key: str,
    point: str,
    count: int,
    action: str,
) -> None:
    name, options = FORMATS[key]
    folder = tmp_path / "run"
    folder.mkdir()
    dst = folder / name
    process = drive(
        folder, point, count, action, "cast:float16", llama, dst, "--no-progress", *options
    )
    _, err = process.communicate(timeout=120)
    if action == "SIGKILL":
        assert process.returncode == -signal.SIGKILL
    elif action == "SIGINT":
        assert process.returncode == 130, err
        assert b"interrupted" in err and b"--resume" in err
    else:
        assert process.returncode == 143, err  # 128 + SIGTERM, as a shell reports it
        assert b"terminated" in err and b"--resume" in err
    assert work_dir(dst).exists()
    if point == "write":  # nothing at DST; a killed run's lock file is reused by the next run
        left = {work_dir(dst).name} | ({lock_path(dst).name} if action == "SIGKILL" else set())
        assert {p.name for p in folder.iterdir()} == left
    shard = 40000 if key in ("split-gguf", "safetensors") else None
    fmt = "npy" if key == "npy" else None
    report = convert(
        "cast:float16", llama, dst, shard_size=shard, format=fmt, resume=True, progress=False
    )
    if point == "write" and count > 3:
        assert report.resumed_outputs > 0
    assert outputs(folder) == references[key]


def test_a_fresh_run_discards_an_interrupted_one_and_says_so(llama: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    dst = folder / "out.npz"
    process = drive(folder, "write", 4, "SIGKILL", "cast:float16", llama, dst, "--no-progress")
    process.communicate(timeout=120)
    report = convert("cast:float16", llama, dst, progress=False)
    assert report.discarded_partial
    assert sorted(p.name for p in folder.iterdir()) == ["out.npz"]


# The destination lock ---------------------------------------------------------------------------


def test_a_held_destination_is_refused_naming_the_holder(llama: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out.npz"
    lock = DestinationLock(dst)
    try:
        with pytest.raises(ConvertError, match=rf"another conversion \(pid {os.getpid()}\)"):
            convert("cast:float16", llama, dst, progress=False)
    finally:
        lock.release()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_two_processes_into_one_npz_one_wins_the_other_refuses(
    llama: Path, references: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    dst = folder / "out.npz"
    winner = drive(folder, "write", 2, "wait", "cast:float16", llama, dst, "--no-progress")
    deadline = time.monotonic() + 60
    while not (work_dir(dst) / staged.DATA_DIR).exists():
        assert winner.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    loser = drive(folder, "write", 0, "none", "cast:float16", llama, dst, "--no-progress")
    _, lost = loser.communicate(timeout=120)
    (tmp_path / "go").touch()
    _, won = winner.communicate(timeout=120)
    assert winner.returncode == 0, won
    assert loser.returncode == 1
    assert f"another conversion (pid {winner.pid})".encode() in lost
    assert b"--resume" not in lost
    assert outputs(folder) == references["npz"]


# Write errors -----------------------------------------------------------------------------------


def test_disk_full_names_the_tensor_and_file_and_resumes(
    llama: Path, references: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    dst = folder / "out.gguf"
    real, calls = staged.write_array_at, []

    def full_disk(fd: int, array: Any, offset: int) -> None:
        calls.append(offset)
        if len(calls) == 4:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, array, offset)

    monkeypatch.setattr(staged, "write_array_at", full_disk)
    monkeypatch.setattr(staged, "JOURNAL_SECONDS", 0.0)
    with pytest.raises(CheckpointError) as caught:
        convert("cast:float16", llama, dst, progress=False)
    message = str(caught.value)
    assert message.startswith("No space left on device while writing tensor '")
    assert f"to {dst}" in message and "--resume" in message
    assert [p.name for p in folder.iterdir()] == [work_dir(dst).name]
    monkeypatch.setattr(staged, "write_array_at", real)
    report = convert("cast:float16", llama, dst, resume=True, progress=False)
    assert report.resumed_outputs == 3
    assert outputs(folder) == references["gguf"]


FSIZE_DRIVER = """
import resource, signal, sys
from lazyparams import cli

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE")
def test_a_file_size_limit_is_refused_naming_the_output_and_nothing_is_at_dst(
    llama: Path, tmp_path: Path
) -> None:
    driver = tmp_path / "fsize.py"
    driver.write_text(FSIZE_DRIVER)
    folder = tmp_path / "run"
    folder.mkdir()
    dst = folder / "out.npz"
    args = [sys.executable, driver, 50_000, "convert", "cast:float16", llama, dst, "--no-progress"]
    done = subprocess.run(
        list(map(str, args)), cwd=folder, env=cli_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "File too large" in done.stderr and str(dst) in done.stderr
    assert not dst.exists() and not lock_path(dst).exists()
