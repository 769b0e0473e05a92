"""Which failures keep the partial output: those a rerun with --resume can get past keep it (an
interruption, a full disk, memory running out, an exception lazyparams does not know), those it
knows are caused by the source or the transform remove it (corrupt data, a check failing on read,
a transform refusing its input). One test per kind of failure, through the Python call and through
the CLI."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams.engine.staged as staged
from lazyparams.cli import main
from lazyparams.engine import convert
from lazyparams.engine.journal import keeps_partial, work_dir
from lazyparams.errors import CheckpointError, ConvertError, LazyParamsError, OutputError
from tests.engine.helpers import read_all
from tests.io.rawzip import STORED, entry, npy_bytes, write_zip
from tests.io.torch_pickles import state_dict_pickle, tensor_opcodes

WEIGHTS = {
    f"w{i}": np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32) + i for i in range(3)
}


def corrupt_npz(folder: Path) -> Path:
    """An npz whose last member is deflated data with a wrong CRC-32: it opens and plans, and
    fails only when that tensor is read."""
    members = [entry(f"{name}.npy", npy_bytes(array)) for name, array in WEIGHTS.items()]
    members[-1] = entry("w2.npy", npy_bytes(WEIGHTS["w2"]), crc=members[-1].crc ^ 0xFFFF)
    return write_zip(folder / "model.npz", members)


def corrupt_torch(folder: Path) -> Path:
    """A torch zip whose storages are deflated and whose last one has a wrong CRC-32."""
    entries = {
        name: tensor_opcodes("FloatStorage", str(i), 0, array.shape, (array.shape[1], 1))
        for i, (name, array) in enumerate(WEIGHTS.items())
    }
    members = [
        entry("archive/data.pkl", state_dict_pickle(entries), method=STORED),
        entry("archive/byteorder", b"little", method=STORED),
        *(entry(f"archive/data/{i}", array.tobytes()) for i, array in enumerate(WEIGHTS.values())),
    ]
    members[-1] = entry("archive/data/2", WEIGHTS["w2"].tobytes(), crc=members[-1].crc ^ 1)
    return write_zip(folder / "model.bin", members)


def honest_npz(folder: Path) -> Path:
    members = [
        entry(f"{name}.npy", npy_bytes(array), method=STORED) for name, array in WEIGHTS.items()
    ]
    return write_zip(folder / "model.npz", members)


def spec_raising(folder: Path, raised: str) -> Path:
    """A transform whose kernel on the last weight raises `raised` (a Python expression)."""
    spec = folder / "spec.py"
    spec.write_text(
        "from lazyparams.frontend import ops\n"
        "from lazyparams.errors import ConvertError\n"
        "def _fail(x):\n"
        f"    raise {raised}\n"
        "def transform(params):\n"
        "    out = {n: params[n].astype('float16') for n in ('w0', 'w1')}\n"
        "    out['w2'] = ops.numpy_kernel(_fail, (64, 32), 'float32', name='fail')(params['w2'])\n"
        "    return out\n"
    )
    return spec


# The rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "kept"),
    [
        (KeyboardInterrupt(), True),
        (SystemExit(1), True),
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EFBIG, "File too large"), True),
        (MemoryError(), True),
        (OutputError("out: writing tensor 'w' failed"), True),
        (CheckpointError("model.npz: member 'w.npy': CRC-32 mismatch"), False),
        (ConvertError("output 'w': expected a tensor of static shape"), False),
        (RuntimeError("a user's kernel failed once"), True),
        (CheckpointError("model.bin: tensor 'w' shrank while it was read"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_only_failures_a_rerun_can_get_past_keep_the_partial(
    failure: BaseException, kept: bool
) -> None:
    assert keeps_partial(failure) is kept


# Caused by the source: removed ------------------------------------------------------------------


@pytest.mark.parametrize("make", [corrupt_npz, corrupt_torch], ids=["npz-deflated", "torch-crc"])
@pytest.mark.parametrize("suffix", [".safetensors", ".gguf", ".npz"])
def test_a_source_corrupt_mid_run_leaves_nothing_behind(
    make: Any, suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make(tmp_path)
    dst = tmp_path / "out" / f"model{suffix}"
    monkeypatch.setattr(staged, "JOURNAL_SECONDS", 0.0)  # the good tensors are journaled
    with pytest.raises(CheckpointError, match=str(src)) as caught:
        convert("cast:float16", src, dst, progress=False)
    assert "w2" in str(caught.value) or "archive/data/2" in str(caught.value)
    assert not dst.exists()
    assert not work_dir(dst).exists()


def test_the_cli_names_the_corrupt_file_and_gives_no_resume_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = corrupt_npz(tmp_path)
    dst = tmp_path / "out.safetensors"
    assert main(["convert", "cast:float16", str(src), str(dst), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {src}") and "w2" in err
    assert "--resume" not in err and "partial" not in err
    assert not work_dir(dst).exists() and not dst.exists()


def test_a_transform_refusing_its_input_leaves_nothing_behind(tmp_path: Path) -> None:
    src = honest_npz(tmp_path)
    spec = spec_raising(tmp_path, "ConvertError('w2: expected finite values')")
    dst = tmp_path / "out.safetensors"
    with pytest.raises(LazyParamsError, match="expected finite values"):
        convert(spec, src, dst, progress=False)
    assert not work_dir(dst).exists() and not dst.exists()


# A rerun can get past it: kept, and resumed --------------------------------------------------------


@pytest.mark.parametrize(
    "raised",
    ["KeyboardInterrupt()", "MemoryError()", "OSError(5, 'Input/output error')"],
    ids=["interrupt", "memory", "io-error"],
)
def test_an_interruption_or_resource_failure_keeps_what_resumes(
    raised: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = honest_npz(tmp_path)
    dst = tmp_path / "out.safetensors"
    expected_type = {"KeyboardInterrupt()": KeyboardInterrupt, "MemoryError()": MemoryError}
    with pytest.raises(expected_type.get(raised, OSError)):
        convert(spec_raising(tmp_path, raised), src, dst, progress=False)
    assert work_dir(dst).is_dir() and not dst.exists()
    report = convert("cast:float16", src, dst, resume=False, progress=False)
    assert report.discarded_partial  # a fresh run replaces it, and says so
    assert set(read_all(dst)) == set(WEIGHTS)


def test_a_full_disk_keeps_the_tensors_written_and_resumes_to_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = honest_npz(tmp_path)
    dst, reference = tmp_path / "out.gguf", tmp_path / "reference.gguf"
    convert("cast:float16", src, reference, progress=False)
    real, calls = staged.write_array_at, []

    def full_disk(fd: int, array: Any, offset: int) -> None:
        calls.append(offset)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, array, offset)

    monkeypatch.setattr(staged, "write_array_at", full_disk)
    monkeypatch.setattr(staged, "JOURNAL_SECONDS", 0.0)
    with pytest.raises(OutputError, match="--resume"):
        convert("cast:float16", src, dst, progress=False)
    assert work_dir(dst).is_dir()
    monkeypatch.setattr(staged, "write_array_at", real)
    report = convert("cast:float16", src, dst, resume=True, progress=False)
    assert report.resumed_outputs == 1
    assert dst.read_bytes() == reference.read_bytes()
