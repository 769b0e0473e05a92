"""A safetensors output keeps the `__metadata__` of a safetensors source (`format: pt`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from lazyparams.engine import convert
from lazyparams.io import open_source
from lazyparams.io.safetensors_format import METADATA_KEY
from tests.engine.helpers import read_all
from tests.engine.test_resume import flaky_spec

TENSORS = {f"layer.{i}.weight": np.full((8, 4), i, np.float32) for i in range(4)}


def _single(folder: Path, metadata: dict[str, str] | None) -> Path:
    folder.mkdir()
    save_file(TENSORS, str(folder / "model.safetensors"), metadata=metadata)
    return folder / "model.safetensors"


def _header_metadata(path: Path) -> dict[str, str] | None:
    with open_source(path) as source:
        return source.metadata  # type: ignore[attr-defined, no-any-return]


def test_a_single_file_keeps_its_metadata(tmp_path: Path) -> None:
    src = _single(tmp_path / "src", {"format": "pt", "note": "kept"})
    convert("cast:float16", src, tmp_path / "out.safetensors", progress=False)
    assert _header_metadata(tmp_path / "out.safetensors") == {"format": "pt", "note": "kept"}
    raw = (tmp_path / "out.safetensors").read_bytes()
    assert METADATA_KEY.encode() in raw[: 8 + int.from_bytes(raw[:8], "little")]


def test_every_output_shard_keeps_the_shards_metadata(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    save_file(dict(list(TENSORS.items())[:2]), str(src / "a.safetensors"), {"format": "pt"})
    save_file(dict(list(TENSORS.items())[2:]), str(src / "b.safetensors"), {"format": "np"})
    weight_map = {
        name: "a.safetensors" if i < 2 else "b.safetensors" for i, name in enumerate(TENSORS)
    }
    index = {"metadata": {}, "weight_map": weight_map}
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    report = convert("cast:float16", src, tmp_path / "out", shard_size=200, progress=False)
    shards = [Path(f) for f in report.files if f.endswith(".safetensors")]
    assert len(shards) > 1
    # a key's first value, shards in order
    assert all(_header_metadata(s) == {"format": "pt"} for s in shards)
    assert read_all(tmp_path / "out")["layer.3.weight"].dtype == np.float16


@pytest.mark.parametrize("metadata", [None, {}])
def test_a_source_without_metadata_gives_an_output_without(
    tmp_path: Path, metadata: dict[str, str] | None
) -> None:
    src = _single(tmp_path / "src", metadata)
    convert("cast:float16", src, tmp_path / "out.safetensors", progress=False)
    assert not _header_metadata(tmp_path / "out.safetensors")


def test_other_formats_are_unchanged(tmp_path: Path) -> None:
    src = _single(tmp_path / "src", {"format": "pt"})
    convert("cast:float16", src, tmp_path / "out.npz", progress=False)
    assert set(read_all(tmp_path / "out.npz")) == set(TENSORS)


def test_a_resumed_run_keeps_the_metadata_too(tmp_path: Path) -> None:
    src = _single(tmp_path / "src", {"format": "pt"})
    spec, marker = flaky_spec(tmp_path, after=2)
    dst = tmp_path / "out.safetensors"
    with pytest.raises(RuntimeError, match="the disk caught fire"):
        convert(str(spec), src, dst, progress=False)
    marker.unlink()
    report = convert(str(spec), src, dst, progress=False, resume=True)
    assert report.resumed_outputs >= 1
    assert _header_metadata(dst) == {"format": "pt"}
    convert(str(spec), src, tmp_path / "whole.safetensors", progress=False)
    assert dst.read_bytes() == (tmp_path / "whole.safetensors").read_bytes()
