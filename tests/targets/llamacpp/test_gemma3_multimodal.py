"""Gemma3ForConditionalGeneration: its text model written as Gemma3ForCausalLM's would be
(the converter reads `text_config` merged over the top level and drops `language_model.` from
every name), the vision tower and projector left out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures_gemma import write_gemma, write_gemma3_multimodal
from tokenizer_fixtures import write_sentencepiece_tokenizer

import lazyparams
from lazyparams.errors import LazyParamsError
from lazyparams.targets.llamacpp.hparams import text_model_config

gguf = pytest.importorskip("gguf")


def _convert(folder: Path, spec: str = "gguf:f32") -> dict[str, np.ndarray]:
    out: dict[str, Any] = {}
    lazyparams.convert(spec, folder, out, progress=False)
    return out


def test_text_model_is_written_as_the_causal_lm(tmp_path: Path) -> None:
    folder, _ = write_gemma3_multimodal(tmp_path / "multimodal")
    text_only, _ = write_gemma(tmp_path / "text", "gemma3")  # the same text weights (seed 0)
    got, expected = _convert(folder, "gguf:q8_0"), _convert(text_only, "gguf:q8_0")
    assert list(got) == list(expected)
    for name, tensor in expected.items():
        np.testing.assert_array_equal(got[name], tensor)
    assert not any("vision" in name or "projector" in name for name in got)


def test_metadata_comes_from_the_text_config(tmp_path: Path) -> None:
    pytest.importorskip("sentencepiece", reason="the llamacpp extra is not installed")
    folder = tmp_path / "multimodal"
    vocab = write_sentencepiece_tokenizer(folder, 400)
    write_gemma3_multimodal(folder, vocab)
    dst = tmp_path / "out.gguf"
    lazyparams.convert("gguf:bf16", folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    fields = {name: f.contents() for name, f in reader.fields.items()}
    assert fields["general.architecture"] == "gemma3"
    assert fields["gemma3.block_count"] == 3
    assert fields["gemma3.attention.head_count_kv"] == 2
    assert fields["gemma3.attention.sliding_window"] == 64
    assert len(fields["tokenizer.ggml.tokens"]) == vocab
    assert len(reader.tensors) == 2 + 3 * 13


def test_a_text_config_without_vocab_size_means_transformers_default(tmp_path: Path) -> None:
    """Google's text_config leaves vocab_size out: 262208, as Gemma3TextConfig fills it, is
    what the embedding is checked against."""
    folder, _ = write_gemma3_multimodal(tmp_path / "multimodal", vocab_size=None)
    config = (folder / "config.json").read_text().replace('"vocab_size": null,', "")
    (folder / "config.json").write_text(config)
    with pytest.raises(LazyParamsError, match="vocab_size=262208"):
        _convert(folder)


def test_text_model_config_merges_text_config_keeping_the_model_class() -> None:
    config = {"architectures": ["X"], "a": 1, "text_config": {"a": 2, "architectures": None}}
    merged = text_model_config(config)
    assert merged["a"] == 2 and merged["architectures"] == ["X"]
    assert text_model_config({"a": 1}) == {"a": 1}
