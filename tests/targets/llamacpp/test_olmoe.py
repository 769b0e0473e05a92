"""OLMoE (olmoe): tensors as llama.cpp's converter writes them (no rotary permutation, q/k norms
over the projection, stacked experts, F32 router) and its metadata read back with gguf-py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_moe import EXPERTS, HIDDEN, LAYERS, OLMOE_FFN, olmoe_layout, random_tensors
from hf_fixtures import write_checkpoint
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")


def _folder(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    config, shapes = olmoe_layout()
    weights = random_tensors(shapes)
    return write_checkpoint(tmp_path / "olmoe", weights, config, shards=3), weights


def _convert(folder: Path, spec: str) -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


@pytest.mark.parametrize("spec", ["gguf:f32", "gguf:bf16", "gguf:q4_k_m"])
def test_experts_router_and_norms(tmp_path: Path, spec: str) -> None:
    folder, weights = _folder(tmp_path)
    out = _convert(folder, spec)
    names = list(out)
    for layer in range(LAYERS):
        down = out[f"blk.{layer}.ffn_down_exps.weight"]
        assert down.shape[0] == EXPERTS
        stacks = [names.index(f"blk.{layer}.ffn_{p}_exps.weight") for p in ("down", "gate", "up")]
        if spec != "gguf:q4_k_m":  # llama-quantize writes the file in its own order
            assert stacks == list(range(stacks[0], stacks[0] + 3))
        else:
            assert down.dtype == np.uint8  # K-quant blocks
        assert out[f"blk.{layer}.ffn_gate_inp.weight"].dtype == np.float32
        assert out[f"blk.{layer}.attn_q_norm.weight"].shape == (HIDDEN,)
    if spec == "gguf:f32":
        for x in range(EXPERTS):
            member = weights[f"model.layers.1.mlp.experts.{x}.down_proj.weight"]
            assert member.shape == (HIDDEN, OLMOE_FFN)
            np.testing.assert_array_equal(out["blk.1.ffn_down_exps.weight"][x], member)
        # OLMoE's q/k rows stay in Hugging Face's order
        q = weights["model.layers.0.self_attn.q_proj.weight"].astype(np.float32)
        np.testing.assert_array_equal(out["blk.0.attn_q.weight"], q)


def test_metadata_fixes_the_rms_epsilon(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    folder, _ = _folder(tmp_path)
    write_bpe_tokenizer(folder, 300, "llama3")
    dst = tmp_path / "olmoe.gguf"
    lazyparams.convert(GGUFTarget("q8_0", pre="olmo"), folder, dst, progress=False)
    fields = {n: f.contents() for n, f in gguf.GGUFReader(dst).fields.items()}
    assert fields["general.architecture"] == "olmoe"
    # config.json says 1e-6; the converter writes 1e-5, in the shared key's place
    assert fields["olmoe.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    keys = [k for k in fields if k.startswith("olmoe.")]
    assert keys.index("olmoe.attention.layer_norm_rms_epsilon") < keys.index("olmoe.expert_count")
    assert fields["olmoe.expert_count"] == EXPERTS and fields["olmoe.expert_used_count"] == 2
    assert "olmoe.expert_feed_forward_length" not in fields
    assert fields["tokenizer.ggml.pre"] == "olmo"


def test_missing_expert_is_refused(tmp_path: Path) -> None:
    config, shapes = olmoe_layout()
    weights = random_tensors(shapes)
    del weights["model.layers.2.mlp.experts.3.up_proj.weight"]
    folder = write_checkpoint(tmp_path / "missing", weights, config)
    with pytest.raises(
        LazyParamsError, match=r"layer 2: expected experts 0\.\.3 .*found \[0, 1, 2\]"
    ):
        _convert(folder, "gguf:f16")
