"""A resume reuses only what its content shows to be the interrupted run's: the source files by
fingerprint (every byte by default, or sampled with verify_resume="sampled"), the output's
tensors by CRC; output names a format cannot store are refused before any data is read."""

from __future__ import annotations

import json
import os
import re
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
from tests.engine.test_resume import flaky_spec, journal_names

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
    with pytest.raises(ConvertError, match="recorded only sampled hashes"):
        sampled_dst = tmp_path / "other.gguf"
        interrupt(src, sampled_dst, monkeypatch, verify_resume="sampled")
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


def _tensor_bytes(path: Path, name: str) -> tuple[int, int]:
    """Where tensor `name`'s bytes lie in the safetensors file `path`: [start, end)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    begin, end = json.loads(raw[8 : 8 + length])[name]["data_offsets"]
    return 8 + length + begin, 8 + length + end


def _outside_the_samples(size: int, start: int, end: int) -> int:
    """An offset in [start, end) that the sampled fingerprint of a file of `size` never reads."""
    stride = (size - fingerprint.HEAD_BYTES - fingerprint.TAIL_BYTES) // (fingerprint.SAMPLES + 1)
    blocks = [fingerprint.HEAD_BYTES + stride * (k + 1) for k in range(fingerprint.SAMPLES)]
    sampled = [(0, fingerprint.HEAD_BYTES), *((b, b + fingerprint.SAMPLE_BYTES) for b in blocks)]
    sampled.append((size - fingerprint.TAIL_BYTES, size))
    return next(at for at in range(start, end, 4096) if not any(a <= at < b for a, b in sampled))


def test_a_byte_flipped_in_a_converted_tensor_is_refused_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fingerprint, "CRC_CHUNK", 1 << 20)  # to check the range named
    src = make_source(tmp_path / "model.safetensors", size=512)  # 4 MiB, sampled in part
    spec, marker = flaky_spec(tmp_path, after=2)
    dst = tmp_path / "out.safetensors"
    with pytest.raises(RuntimeError, match="the disk caught fire"):
        convert(str(spec), src, dst, progress=False)
    converted = journal_names(dst)
    assert converted and len(converted) < 4
    start, end = _tensor_bytes(src, converted[0])
    offset = _outside_the_samples(src.stat().st_size, start, end)
    rewrite_keeping_size_and_mtime(src, offset)
    marker.unlink()
    chunk = offset >> 20 << 20
    expected = (
        f"source file 'model.safetensors' changed content (its size kept) in bytes [{chunk}, "
    )
    with pytest.raises(ConvertError, match=re.escape(expected)):
        convert(str(spec), src, dst, resume=True, progress=False)
    assert not dst.exists() and work_dir(dst).exists()
    # the sampled check, the default before, reads none of that tensor's changed bytes
    convert(str(spec), src, dst, resume=True, progress=False, verify_resume="sampled")
