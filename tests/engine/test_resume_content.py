"""A resume reuses only what its content shows to be the interrupted run's: the source files by
fingerprint (sampled, or every byte with verify_resume="full"), the output's tensors by CRC;
output names a format cannot store are refused before any data is read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams.engine.fingerprint as fingerprint
import lazyparams.engine.staged as staged
from lazyparams.engine import convert
from lazyparams.engine.journal import work_dir
from lazyparams.errors import CheckpointError, ConvertError
from lazyparams.io import SafetensorsSink, TensorInfo
from tests.engine.helpers import CountingSource, tree_bytes

NAMED = """
NAMES = {names!r}


def transform(params):
    first = next(iter(params.values()))
    return {{name: first for name in NAMES}}
"""


@pytest.mark.parametrize("suffix", [".npz", "", ".gguf"])
@pytest.mark.parametrize("bad", ["../../x", "/abs/x", "a\x00b", "caf\udce9"])
def test_unsafe_output_names_are_refused_before_any_data(
    tmp_path: Path, suffix: str, bad: str
) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(NAMED.format(names=["fine", bad]), encoding="utf-8", errors="surrogatepass")
    source = CountingSource({"w": np.ones((4, 4), np.float32)})
    fmt = "npy" if suffix == "" else None
    if suffix == ".gguf" and bad in ("../../x", "/abs/x"):
        pytest.skip("a plain string is a valid GGUF tensor name")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CheckpointError) as caught:
        convert(str(spec), source, out / f"o{suffix}", format=fmt, progress=False)
    assert repr(bad) in str(caught.value) and "expected" in str(caught.value)
    assert source.loads == [] and list(out.iterdir()) == []


def test_npy_names_colliding_on_a_case_folding_disk_are_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(NAMED.format(names=["Norm", "norm"]))
    source = CountingSource({"w": np.ones((4,), np.float32)})
    with pytest.raises(CheckpointError, match="'Norm' and 'norm' would be the same file"):
        convert(str(spec), source, tmp_path / "out", format="npy", progress=False)
    assert source.loads == [] and not (tmp_path / "out").exists()


# Content-checked resume ---------------------------------------------------------------------


def make_source(path: Path, size: int = 64) -> Path:
    """A safetensors file of four float32 tensors of `size` x `size`."""
    rng = np.random.default_rng(3)
    infos = [TensorInfo.of(f"t{i}", (size, size), "float32") for i in range(4)]
    with SafetensorsSink(path, infos) as sink:
        for info in infos:
            sink.write(info.name, rng.standard_normal(info.shape).astype(np.float32))
    return path


def interrupt(
    src: Path, dst: Path, monkeypatch: pytest.MonkeyPatch, after: int = 2, **options: Any
) -> None:
    """Convert until `after` tensors are journaled, then fail as a crash would."""
    real, calls = staged.write_array_at, []

    def failing(fd: int, array: Any, offset: int) -> None:
        calls.append(offset)
        if len(calls) > after:
            raise RuntimeError("power cut")
        real(fd, array, offset)

    with monkeypatch.context() as patch:
        patch.setattr(staged, "write_array_at", failing)
        patch.setattr(staged, "JOURNAL_SECONDS", 0.0)
        with pytest.raises(RuntimeError, match="power cut"):
            convert("cast:float16", src, dst, progress=False, **options)
    assert work_dir(dst).exists() and not dst.exists()


def rewrite_keeping_size_and_mtime(path: Path, offset: int) -> None:
    stat = path.stat()
    with open(path, "r+b") as fp:
        fp.seek(offset)
        byte = fp.read(1)
        fp.seek(offset)
        fp.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns


def test_a_source_changed_in_place_is_refused_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_source(tmp_path / "model.safetensors")
    dst = tmp_path / "out.npz"
    interrupt(src, dst, monkeypatch)
    rewrite_keeping_size_and_mtime(src, src.stat().st_size - 5)
    with pytest.raises(ConvertError, match=r"source file 'model\.safetensors' changed content"):
        convert("cast:float16", src, dst, resume=True, progress=False)
    assert not dst.exists()


def test_full_verification_sees_a_change_sampling_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in [("WHOLE_BYTES", 1024), ("HEAD_BYTES", 1024), ("TAIL_BYTES", 1024)]:
        monkeypatch.setattr(fingerprint, name, value)
    monkeypatch.setattr(fingerprint, "SAMPLES", 2)
    monkeypatch.setattr(fingerprint, "SAMPLE_BYTES", 16)
    src = make_source(tmp_path / "model.safetensors")
    dst = tmp_path / "out.gguf"
    interrupt(src, dst, monkeypatch, verify_resume="full")
    with pytest.raises(ConvertError, match="recorded only sampled ones"):
        sampled_dst = tmp_path / "other.gguf"
        interrupt(src, sampled_dst, monkeypatch)
        convert("cast:float16", src, sampled_dst, resume=True, verify_resume="full")
    rewrite_keeping_size_and_mtime(src, 20_000)  # between the samples
    with pytest.raises(ConvertError, match=r"'model\.safetensors' changed content"):
        convert("cast:float16", src, dst, resume=True, verify_resume="full", progress=False)


def test_a_damaged_reused_tensor_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_source(tmp_path / "model.safetensors")
    reference = tmp_path / "reference"
    reference.mkdir()
    convert("cast:float16", src, reference / "out.npz", progress=False)
    run = tmp_path / "run"
    run.mkdir()
    dst = run / "out.npz"
    interrupt(src, dst, monkeypatch)
    data = work_dir(dst) / staged.DATA_DIR / "out.npz"
    rewrite_keeping_size_and_mtime(data, 300)  # inside the first member's bytes
    report = convert("cast:float16", src, dst, resume=True, progress=False)
    assert report.resumed_outputs == 1  # of the two journaled, only the intact one
    assert tree_bytes(run) == tree_bytes(reference)
