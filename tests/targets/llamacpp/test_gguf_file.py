"""Whole GGUF files from the gguf recipe, read back with gguf-py: names, shapes, types, metadata."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hf_fixtures import write_model
from tokenizer_fixtures import write_bpe_tokenizer, write_sentencepiece_tokenizer

import lazyparams
from lazyparams.targets.llamacpp.target import GGUFTarget

gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece", reason="the llamacpp extra (sentencepiece) is not installed")
pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")

BPE = {"qwen2", "qwen3"}


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    """One trained tokenizer per kind, copied into each model folder."""
    root = tmp_path_factory.mktemp("tokenizers")
    spm = root / "spm"
    bpe = root / "bpe"
    return {
        "spm": (spm, write_sentencepiece_tokenizer(spm, 400)),
        "bpe": (bpe, write_bpe_tokenizer(bpe, 400, "qwen2")),
    }


def _model(
    tmp_path: Path, kind: str, tokenizers: dict[str, tuple[Path, int]], **shape: Any
) -> Path:
    source, vocab = tokenizers["bpe" if kind in BPE else "spm"]
    folder = write_model(tmp_path / f"tiny-{kind}", kind, vocab=vocab, **shape)
    for file in source.iterdir():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def _fields(reader: Any) -> dict[str, Any]:
    return {name: field.contents() for name, field in reader.fields.items()}


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "qwen3", "mixtral"])
def test_file_has_llamacpp_metadata_and_tensors(
    tmp_path: Path, kind: str, tokenizers: dict[str, tuple[Path, int]]
) -> None:
    folder = _model(tmp_path, kind, tokenizers)
    spec = GGUFTarget("f16", pre="qwen2" if kind in BPE else None)
    expected: dict[str, Any] = {}
    lazyparams.convert(spec, folder, expected, progress=False)
    dst = tmp_path / "out.gguf"
    lazyparams.convert(spec, folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    fields = _fields(reader)
    arch = "qwen2" if kind == "qwen2" else "qwen3" if kind == "qwen3" else "llama"
    assert list(fields)[3] == "general.architecture"  # after the three header fields
    assert fields["general.architecture"] == arch
    assert fields["general.type"] == "model"
    # gguf-py's naming heuristics, as llama.cpp's converter applies them: "Tiny Llama"
    assert fields["general.name"].lower().replace(" ", "-") == f"tiny-{kind}"
    assert fields["general.file_type"] == 1
    assert fields["general.quantization_version"] == 2
    assert fields[f"{arch}.block_count"] == 2
    assert fields[f"{arch}.embedding_length"] == 64
    assert fields[f"{arch}.attention.head_count"] == 4
    assert fields[f"{arch}.attention.head_count_kv"] == 2
    assert fields[f"{arch}.context_length"] == 2048
    assert fields["tokenizer.ggml.model"] == ("gpt2" if kind in BPE else "llama")
    assert (
        len(fields["tokenizer.ggml.tokens"]) == fields.get(f"{arch}.vocab_size", 400) or kind in BPE
    )
    if kind == "mixtral":
        # llama.cpp's size label counts experts per expert tensor: 4 experts, not 4 x 3 tensors
        assert fields["general.size_label"].startswith("4x")
        assert fields["llama.expert_count"] == 4
        assert fields["llama.expert_used_count"] == 2
    if arch == "llama":
        assert fields["llama.rope.dimension_count"] == 16
    if kind == "qwen3":
        assert fields["qwen3.attention.key_length"] == 32
    names = [tensor.name for tensor in reader.tensors]
    assert names == list(expected)
    for tensor in reader.tensors:
        want = expected[tensor.name]
        assert tuple(int(d) for d in reversed(tensor.shape.tolist())) == want.shape
        assert np.array_equal(np.asarray(tensor.data).reshape(want.shape), want)


@pytest.mark.parametrize("file_type", ["q8_0", "Q4_K_M", "Q5_K_S", "Q6_K", "Q4_0"])
def test_quantized_file_equals_ggml_reference(
    tmp_path: Path, file_type: str, tokenizers: dict[str, tuple[Path, int]]
) -> None:
    """Each tensor's type as llama-quantize picks it, and its bytes as ggml's reference
    quantizer gives them for the bf16 weights widened to float32."""
    sys.path.insert(0, str(Path(__file__).parents[2] / "runtime"))
    from ggml_oracle import require_oracle

    oracle = require_oracle()
    # rows of 256 and 512 fill K-quant super-blocks; the 400-token embedding's rows too
    folder = _model(tmp_path, "llama", tokenizers, hidden=256, intermediate=512)
    exact: dict[str, Any] = {}
    lazyparams.convert("gguf:f32", folder, exact, progress=False)
    dst = tmp_path / "q.gguf"
    lazyparams.convert(f"gguf:{file_type}", folder, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    fields = _fields(reader)
    assert (
        fields["general.file_type"]
        == gguf.LlamaFileType["MOSTLY_" + ("Q8_0" if file_type == "q8_0" else file_type)]
    )
    if file_type != "q8_0":  # llama-quantize's layout: its tensor order, these two keys last
        assert list(fields)[-2:] == ["general.quantization_version", "general.file_type"]
        names = [t.name for t in reader.tensors]
        assert names[:2] == ["output.weight", "output_norm.weight"]
    quantized, kinds = 0, set()
    for tensor in reader.tensors:
        name = tensor.tensor_type.name.lower()
        data = np.asarray(tensor.data)
        source = exact[tensor.name]
        if name in ("f32", "f16", "bf16"):
            continue
        rows = source.reshape(-1, source.shape[-1]).astype(np.float32)
        assert np.array_equal(data.reshape(rows.shape[0], -1), oracle.quantize(name, rows))
        quantized += 1
        kinds.add(name)
    assert quantized >= 10
    if (file_type.startswith("Q") and "_K" in file_type) or file_type == "Q6_K":
        assert any(kind.endswith("_k") for kind in kinds), kinds
