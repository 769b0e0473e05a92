"""Every refusal happens before any tensor is read, names its culprit, and leaves DST untouched."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.engine import convert, plan
from lazyparams.engine.journal import work_dir
from lazyparams.errors import (
    BudgetError,
    CheckpointError,
    ConvertError,
    LazyParamsError,
    TraceError,
)
from lazyparams.frontend import ops
from lazyparams.io import plan_shards
from tests.engine.helpers import CountingSource, bert_tensors

Q = "bert.encoder.layer.0.attention.self.query.weight"
INTER = "bert.encoder.layer.0.intermediate.dense.weight"


def refuse(
    tmp_path: Path, transform: Any, error: type[LazyParamsError], dst: Path | None = None, **kw: Any
) -> str:
    """Run a conversion that must be refused; check nothing was read or written."""
    source = CountingSource(bert_tensors())
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(error) as err:
        convert(transform, source, dst or tmp_path / "out", progress=False, **kw)
    assert source.loads == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    message = str(err.value)
    assert message.splitlines()[0] == message.split("\n    ")[0]  # one line, then source text
    return message


def test_a_missing_input_is_named(tmp_path: Path) -> None:
    message = refuse(
        tmp_path, lambda p: {"q": p["model.layers.0.self_attn.q_proj.weight"]}, TraceError
    )
    assert "params['model.layers.0.self_attn.q_proj.weight']: expected one of the" in message
    assert "test_refusals.py:" in message


def test_a_misspelled_input_gets_a_suggestion(tmp_path: Path) -> None:
    name = Q.replace("query", "qeury")
    message = refuse(tmp_path, lambda p: {"q": p[name]}, TraceError)
    assert f"did you mean {Q!r}" in message


def test_an_input_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    def transform(params: Any) -> dict[str, Any]:
        return {"fused": ops.concat([params[Q], params[INTER]], axis=1)}

    message = refuse(tmp_path, transform, TraceError)
    assert "concat" in message and "expected" in message and "got" in message
    assert "ops.concat([params[Q], params[INTER]], axis=1)" in message  # the user's line


def test_an_input_of_the_wrong_dtype_is_named(tmp_path: Path) -> None:
    def transform(params: Any) -> dict[str, Any]:
        return {"sum": params[Q] + params[Q].astype("float16")}

    message = refuse(tmp_path, transform, TraceError)
    assert "float32" in message and "float16" in message


def test_a_budget_that_cannot_hold(tmp_path: Path) -> None:
    message = refuse(tmp_path, "fuse-qkv", BudgetError, budget="1KiB")
    assert "memory budget of 1024 bytes (1.0 KiB) is too small: binding" in message
    assert "expected a budget of at least" in message


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_an_existing_destination(tmp_path: Path, kind: str) -> None:
    dst = tmp_path / ("out" if kind == "folder" else "out.safetensors")
    if kind == "folder":
        dst.mkdir()
        (dst / "keep.txt").write_text("precious")
    else:
        dst.write_text("precious")
    message = refuse(tmp_path, "cast", ConvertError, dst)
    assert message == (
        f"{dst}: already exists; expected a destination that does not exist (remove it or "
        "choose another)"
    )
    assert (dst / "keep.txt" if kind == "folder" else dst).read_text() == "precious"


def test_an_existing_shard_of_the_destination(tmp_path: Path) -> None:
    dst = tmp_path / "model.safetensors"
    outputs = plan("cast", CountingSource(bert_tensors())).outputs
    shard = plan_shards(dst, outputs, 5_000).shards[1][0]
    shard.write_text("precious")
    message = refuse(tmp_path, "cast", ConvertError, dst, shard_size=5_000)
    assert message.startswith(f"{shard}: already exists")
    assert shard.read_text() == "precious"


def test_an_unwritable_destination(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    message = refuse(tmp_path, "cast", ConvertError, blocker / "out")
    assert message.startswith(f"{blocker / 'out'}: cannot write the output:")
    assert "expected a writable destination folder" in message
    assert blocker.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root writes")
def test_a_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        source = CountingSource(bert_tensors())
        with pytest.raises(ConvertError, match="cannot write the output"):
            convert("cast", source, folder / "out", progress=False)
        assert source.loads == [] and list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)


def test_an_output_dtype_the_format_cannot_hold(tmp_path: Path) -> None:
    message = refuse(tmp_path, lambda p: {"w": p[Q].astype("int4")}, CheckpointError)
    assert "tensor 'w': safetensors has no dtype for int4" in message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"format": "onnx"},
            "format: expected one of safetensors, gguf, npy, npz, pytorch, got 'onnx'",
        ),
        (
            {"format": "npz", "shard_size": "1MiB"},
            "shard_size: sharding is for safetensors and gguf output, not npz",
        ),
        (
            {"format": "npz", "metadata": {"general.name": "m"}},
            "metadata: key/value metadata is for gguf output, not npz",
        ),
        (
            {"verify_resume": "some"},
            "verify_resume: expected one of full, sampled, got 'some'",
        ),
        ({"shard_size": "big"}, "shard_size: expected a size like 512MiB"),
        ({"workers": -1}, "workers: expected a positive int, got -1"),
    ],
)
def test_bad_options(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    assert message in refuse(tmp_path, "cast", ConvertError, **kwargs)


def test_metadata_for_a_dict_destination_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="metadata: applies to a destination path, got a dict"):
        convert("cast", CountingSource(bert_tensors()), {}, metadata={"a": 1}, progress=False)


def test_bad_gguf_metadata_is_refused_before_reading(tmp_path: Path) -> None:
    message = refuse(
        tmp_path, "cast", CheckpointError, tmp_path / "m.gguf", metadata={"general.name": None}
    )
    assert "m.gguf: metadata key 'general.name': expected a gguf.GGUFValue, str" in message


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fuse-qkv+shrink", "unknown recipe 'shrink'"),
        ("missing_spec.py", "missing_spec.py: spec file not found"),
    ],
)
def test_a_bad_spec(tmp_path: Path, spec: str, message: str) -> None:
    assert message in refuse(tmp_path, spec, ConvertError)


def test_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no-such-checkpoint: no such file or folder"):
        convert("cast", tmp_path / "no-such-checkpoint", tmp_path / "out", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_failure_inside_the_run_leaves_dst_absent(tmp_path: Path) -> None:
    source = CountingSource(bert_tensors())

    def broken(x: np.ndarray) -> np.ndarray:
        raise ValueError("kernel bug")

    def transform(params: Any) -> dict[str, Any]:
        kernel: Callable[..., Any] = ops.numpy_kernel(broken, (2,), "float32", name="broken")
        return {"w": params[Q], "b": kernel(params[INTER])}

    with pytest.raises(ValueError, match="kernel bug"):
        convert(transform, source, tmp_path / "out.npz", progress=False)
    assert [p.name for p in tmp_path.iterdir()] == [work_dir(tmp_path / "out.npz").name]
