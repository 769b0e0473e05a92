"""convert(...) into GGUF: metadata handed to the sink, split parts, nothing left on failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFValue, GGUFValueType

from lazyparams.engine import convert
from lazyparams.engine.journal import work_dir
from lazyparams.errors import ConvertError
from lazyparams.frontend import ops
from lazyparams.io import GGUFSplitSource, open_source, read_gguf_metadata
from tests.engine.helpers import CountingSource, bert_tensors, read_all

METADATA = {
    "general.architecture": "bert",
    "bert.block_count": 1,
    "general.tags": GGUFValue(["a", "b"], GGUFValueType.ARRAY, GGUFValueType.STRING),
}


def copy(params: Any) -> dict[str, Any]:
    return dict(params)


def test_metadata_reaches_the_gguf_file(tmp_path: Path) -> None:
    tensors = bert_tensors()
    convert(copy, CountingSource(tensors), tmp_path / "m.gguf", metadata=METADATA, progress=False)
    got = read_gguf_metadata(tmp_path / "m.gguf")
    assert got["bert.block_count"] == GGUFValue(1, GGUFValueType.UINT32)
    assert list(got) == list(METADATA)
    assert {k: v.tobytes() for k, v in read_all(tmp_path / "m.gguf").items()} == {
        k: v.reshape(v.shape).tobytes() for k, v in tensors.items()
    }


def test_split_output_lists_every_part_and_reads_back_whole(tmp_path: Path) -> None:
    tensors = bert_tensors()
    whole = convert(copy, CountingSource(tensors), tmp_path / "one.gguf", progress=False)
    report = convert(
        copy,
        CountingSource(tensors),
        tmp_path / "split" / "m.gguf",
        shard_size="16KiB",
        metadata=METADATA,
        progress=False,
    )
    files = [Path(f) for f in report.files]
    assert len(files) > 2 and all(f.exists() for f in files)
    assert files[0].name == f"m-00001-of-{len(files):05d}.gguf"
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == sorted(f.name for f in files)
    assert whole.files == (str(tmp_path / "one.gguf"),)
    with open_source(files[0]) as source:
        assert isinstance(source, GGUFSplitSource)
        assert source.names() == list(tensors)
    split, one = read_all(files[0]), read_all(tmp_path / "one.gguf")
    assert all(split[name].tobytes() == one[name].tobytes() for name in tensors)
    assert list(read_gguf_metadata(files[0])) == list(METADATA)
    assert list(read_gguf_metadata(files[1], include_split=True)) == [
        "split.no",
        "split.count",
        "split.tensors.count",
    ]


def test_a_failing_split_conversion_leaves_nothing_at_dst(tmp_path: Path) -> None:
    def fail(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("kernel failed")

    def transform(params: Any) -> dict[str, Any]:
        broken = ops.numpy_kernel(fail, (2,), "float32", name="fail")
        return {**params, "z.broken": broken(params["bert.pooler.dense.weight"])}

    dst = tmp_path / "out" / "m.gguf"
    with pytest.raises(RuntimeError, match="kernel failed"):
        convert(transform, CountingSource(bert_tensors()), dst, shard_size="8KiB", progress=False)
    # no part is published; the work folder is kept for --resume
    assert [p.name for p in (tmp_path / "out").iterdir()] == [work_dir(dst).name]


def test_an_existing_part_is_refused_before_reading(tmp_path: Path) -> None:
    source = CountingSource(bert_tensors())
    report = convert(copy, source, tmp_path / "m.gguf", shard_size="16KiB", progress=False)
    source.loads.clear()
    with pytest.raises(ConvertError, match=r"m-00001-of-.*already exists"):
        convert(copy, source, tmp_path / "m.gguf", shard_size="16KiB", progress=False)
    assert source.loads == [] and len(report.files) > 1
