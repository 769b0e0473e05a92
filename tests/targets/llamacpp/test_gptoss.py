"""gpt-oss with float experts (gpt-oss): tensors as llama.cpp's converter writes them (fused
experts split column by column into gate and up, transposed, their biases split alike,
attention sinks, router with a bias), its metadata read back with gguf-py, and the refusals
(MXFP4 experts among them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_moe import (
    EXPERTS,
    GPTOSS_FFN,
    HEADS,
    HIDDEN,
    LAYERS,
    gptoss_layout,
    random_tensors,
)
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")


def _folder(tmp_path: Path, **config: Any) -> tuple[Path, dict[str, Any]]:
    base, shapes = gptoss_layout()
    weights = random_tensors(shapes)
    return write_checkpoint(tmp_path / "gptoss", weights, {**base, **config}, shards=2), weights


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_fused_experts_and_biases_split(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path)
    out = _convert(folder)
    e = "model.layers.2.mlp.experts"
    gate_up = weights[f"{e}.gate_up_proj"].astype(np.float32)
    gate, up = out["blk.2.ffn_gate_exps.weight"], out["blk.2.ffn_up_exps.weight"]
    assert gate.shape == up.shape == (EXPERTS, GPTOSS_FFN, HIDDEN)
    for x in range(EXPERTS):
        np.testing.assert_array_equal(gate[x], gate_up[x, :, 0::2].T)
        np.testing.assert_array_equal(up[x], gate_up[x, :, 1::2].T)
        down = weights[f"{e}.down_proj"][x].astype(np.float32)
        np.testing.assert_array_equal(out["blk.2.ffn_down_exps.weight"][x], down.T)
    bias = weights[f"{e}.gate_up_proj_bias"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.2.ffn_gate_exps.bias"], bias[:, 0::2])
    np.testing.assert_array_equal(out["blk.2.ffn_up_exps.bias"], bias[:, 1::2])
    names = list(out)
    split = [f"blk.0.ffn_{p}_exps.{k}" for p, k in (("gate", "weight"), ("up", "weight"))]
    assert names.index(split[0]) + 1 == names.index(split[1])
    assert out["blk.0.attn_sinks.weight"].shape == (HEADS,)
    typed = _convert(folder, "gguf:q8_0")
    for name in ("attn_sinks.weight", "ffn_gate_inp.weight", "ffn_gate_inp.bias"):
        assert typed[f"blk.1.{name}"].dtype == np.float32, name
    assert typed["blk.1.ffn_down_exps.bias"].dtype == np.float32
    assert typed["blk.1.ffn_gate_exps.weight"].dtype == np.uint8
    mixture = _convert(folder, "gguf:q4_k_m")
    assert mixture["blk.1.ffn_down_exps.weight"].dtype == np.uint8


def test_metadata(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    folder, _ = _folder(tmp_path)
    write_bpe_tokenizer(folder, 400, "llama3")
    dst = tmp_path / "gptoss.gguf"
    lazyparams.convert(GGUFTarget("bf16", pre="gpt-4o"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    a = "gpt-oss."
    assert fields["general.architecture"] == "gpt-oss"
    assert fields[a + "block_count"] == LAYERS
    assert fields[a + "rope.scaling.type"] == "yarn"
    assert fields[a + "rope.scaling.factor"] == 32.0
    assert fields[a + "attention.key_length"] == 16
    keys = [k for k in fields if k.startswith(a)]
    assert keys[-2:] == [a + "attention.sliding_window", a + "expert_feed_forward_length"]
    assert fields[a + "attention.sliding_window"] == 128
    assert fields[a + "expert_feed_forward_length"] == GPTOSS_FFN


def test_refusals(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path / "count", num_local_experts=8)
    with pytest.raises(LazyParamsError, match=r"experts\.down_proj.* num_local_experts=8"):
        _convert(folder)
    folder, _ = _folder(tmp_path / "window", sliding_window=None)
    write_bpe_tokenizer(folder, 400, "llama3")
    with pytest.raises(LazyParamsError, match=r"'sliding_window'"):
        lazyparams.convert(GGUFTarget("f16", pre="gpt-4o"), folder, tmp_path / "w.gguf")
    assert not (tmp_path / "w.gguf").exists()
    # MXFP4 experts as released: refused by the checkpoint reader, in one line
    folder, _ = _folder(tmp_path / "mxfp4")
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "mxfp4"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(LazyParamsError, match=r"quant_method 'mxfp4' is not supported"):
        _convert(folder)
