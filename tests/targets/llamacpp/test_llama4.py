"""Llama-4 text (llama4): tensors as llama.cpp's converter writes them (fused experts split and
transposed, shared expert, F32 router, dense layers between, llama 3 rope factors), its
metadata read back with gguf-py, and the refusals."""

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
    HIDDEN,
    LLAMA4_FFN,
    LLAMA4_MOE_FFN,
    llama4_layout,
    random_tensors,
)
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")


def _folder(tmp_path: Path, **config: Any) -> tuple[Path, dict[str, Any]]:
    base, shapes = llama4_layout()
    weights = random_tensors(shapes)
    return write_checkpoint(tmp_path / "llama4", weights, {**base, **config}, shards=2), weights


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_fused_experts_split_and_transposed(tmp_path: Path) -> None:
    folder, weights = _folder(tmp_path)
    out = _convert(folder)
    names = list(out)
    assert names[0] == "rope_freqs.weight"
    gate_up = weights["model.layers.1.feed_forward.experts.gate_up_proj"].astype(np.float32)
    down = weights["model.layers.1.feed_forward.experts.down_proj"].astype(np.float32)
    gate, up = out["blk.1.ffn_gate_exps.weight"], out["blk.1.ffn_up_exps.weight"]
    assert gate.shape == up.shape == (EXPERTS, LLAMA4_MOE_FFN, HIDDEN)
    for x in range(EXPERTS):
        np.testing.assert_array_equal(gate[x], gate_up[x, :, :LLAMA4_MOE_FFN].T)
        np.testing.assert_array_equal(up[x], gate_up[x, :, LLAMA4_MOE_FFN:].T)
        np.testing.assert_array_equal(out["blk.1.ffn_down_exps.weight"][x], down[x].T)
    assert names.index("blk.1.ffn_gate_exps.weight") + 1 == names.index("blk.1.ffn_up_exps.weight")
    assert out["blk.0.ffn_up.weight"].shape == (LLAMA4_FFN, HIDDEN)
    assert "blk.1.ffn_up.weight" not in out and "blk.2.ffn_up_exps.weight" not in out
    q = weights["model.layers.0.self_attn.q_proj.weight"].astype(np.float32)
    np.testing.assert_array_equal(out["blk.0.attn_q.weight"], q)  # no rotary permutation
    typed = _convert(folder, "gguf:q8_0")
    assert typed["blk.1.ffn_gate_inp.weight"].dtype == np.float32
    assert typed["blk.1.ffn_up_exps.weight"].dtype == np.uint8
    assert _convert(folder, "gguf:q4_k_m")["blk.1.ffn_down_exps.weight"].dtype == np.uint8


def test_metadata(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    folder, _ = _folder(tmp_path)
    write_bpe_tokenizer(folder, 400, "llama3")
    dst = tmp_path / "llama4.gguf"
    lazyparams.convert(GGUFTarget("bf16", pre="llama4"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    a = "llama4."
    assert fields[a + "feed_forward_length"] == LLAMA4_FFN  # the dense width
    assert fields[a + "expert_feed_forward_length"] == LLAMA4_MOE_FFN
    assert fields[a + "interleave_moe_layer_step"] == 2
    assert fields[a + "expert_count"] == EXPERTS and fields[a + "expert_used_count"] == 1
    assert fields[a + "rope.dimension_count"] == 16 and fields[a + "vocab_size"] == 512
    assert a + "attention.sliding_window" not in fields  # some layers are chunked
    keys = [k for k in fields if k.startswith(a)]
    assert keys[-2:] == [a + "interleave_moe_layer_step", a + "expert_feed_forward_length"]


def test_all_full_attention_and_layers_by_step(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path, layer_types=["full_attention"] * 3, moe_layers=None)
    config = json.loads((folder / "config.json").read_text())
    del config["moe_layers"]  # experts every interleave_moe_layer_step-th layer
    (folder / "config.json").write_text(json.dumps(config))
    write_bpe_tokenizer(folder, 400, "llama3")
    dst = tmp_path / "full.gguf"
    lazyparams.convert(GGUFTarget("f16", pre="llama4"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    assert fields["llama4.attention.sliding_window"] == 0


def test_refusals(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path / "count", num_local_experts=8)
    with pytest.raises(
        LazyParamsError, match=r"experts\.(gate_up|down)_proj.* num_local_experts=8"
    ):
        _convert(folder)
    folder, _ = _folder(tmp_path / "layers", moe_layers=[2])
    with pytest.raises(LazyParamsError, match=r"makes layer 1 a dense layer"):
        _convert(folder)
