"""Through the CLI on generated llama-like checkpoints, sharded in and out: the outputs equal the
eager numpy computation, and resident memory follows the plan, whatever the number of layers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.engine.demo import LlamaShape, make_llama_checkpoint
from tests.engine.helpers import eager_fuse_cast, read_all, run_cli

# The peak (6 MiB) dwarfs what the interpreter and the kernels' bounded scratch add (about 1 MiB);
# 32 layers still convert in a second or two.
HIDDEN, INTERMEDIATE, VOCAB = 384, 1024, 1024


def convert_through_cli(tmp_path: Path, layers: int) -> tuple[dict[str, Any], Path, Path]:
    shape = LlamaShape(layers, HIDDEN, INTERMEDIATE, VOCAB)
    src = make_llama_checkpoint(tmp_path / f"llama{layers}", shape, shard_size=8 << 20)
    dst = tmp_path / f"out{layers}"
    options = ["--shard-size", "4MiB", "--json"]
    done = run_cli("convert", "fuse-qkv+cast:float16", src, dst, *options, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), src, dst


def assert_equal_to_eager(src: Path, dst: Path, every_layer: bool) -> None:
    """The outputs equal the eager numpy computation: all of them, or a few layers' worth."""
    tensors = read_all(src)
    if not every_layer:
        kept = (".layers.0.", ".layers.17.", ".layers.31.", "embed", "norm.weight", "lm_head")
        tensors = {n: v for n, v in tensors.items() if any(k in n for k in kept)}
    want, got = eager_fuse_cast(tensors), read_all(dst)
    if every_layer:
        assert set(got) == set(want)
    else:  # per layer: qkv, o, gate_up, down and two norms; then embed, norm, lm_head
        assert set(want) < set(got) and len(got) == 6 * 32 + 3
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident memory via /proc")
def test_cli_conversion_is_exact_and_its_memory_follows_the_plan(tmp_path: Path) -> None:
    reports = {}
    for layers in (8, 32):
        report, src, dst = convert_through_cli(tmp_path, layers)
        assert len(list(src.glob("*.safetensors"))) > 1
        assert len(list(dst.glob("*.safetensors"))) > 1
        assert_equal_to_eager(src, dst, every_layer=layers == 8)
        predicted, resident = report["predicted_peak_bytes"], report["peak_rss_bytes"]
        assert report["measured_peak_bytes"] == predicted
        assert predicted / 1.25 <= resident <= 1.25 * predicted, (layers, predicted, resident)
        assert report["eager_peak_bytes"] > 8 * predicted
        reports[layers] = report
    assert reports[32]["predicted_peak_bytes"] == reports[8]["predicted_peak_bytes"]
    assert reports[32]["peak_rss_bytes"] <= 1.25 * reports[8]["predicted_peak_bytes"]
    assert reports[32]["bytes_in"] > 3 * reports[8]["bytes_in"]
