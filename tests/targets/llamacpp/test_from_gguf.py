"""A GGUF file through the gguf recipe (requantized, metadata kept) and back to safetensors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "runtime"))

from ggml_oracle import require_oracle
from hf_fixtures import write_model
from safetensors.numpy import load_file

import lazyparams

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def q8_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A llama GGUF in q8_0 with a few hand-set metadata pairs (no tokenizer needed)."""
    root = tmp_path_factory.mktemp("q8")
    folder = write_model(root / "m", "llama", hidden=256, intermediate=512)
    weights: dict[str, Any] = {}
    lazyparams.convert("gguf:f32", folder, weights, progress=False)
    meta = {
        "general.architecture": "llama",
        "general.name": "m",
        "llama.block_count": 2,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "general.file_type": 7,
    }
    dst = root / "m-q8_0.gguf"
    spec = lambda p: {n: (t if t.ndim < 2 else t.astype("q8_0")) for n, t in p.items()}  # noqa: E731
    lazyparams.convert(
        spec, write_weights(root / "f32.safetensors", weights), dst, metadata=meta, progress=False
    )
    return dst


def write_weights(path: Path, weights: dict[str, Any]) -> Path:
    from safetensors.numpy import save_file

    save_file(weights, str(path))
    return path


def _dequantized(reader: Any) -> dict[str, np.ndarray]:
    out = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        out[t.name] = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(shape)
    return out


def test_requantize_q8_0_to_q4_k_m(tmp_path: Path, q8_file: Path) -> None:
    oracle = require_oracle()
    source = gguf.GGUFReader(q8_file)
    dst = tmp_path / "m-Q4_K_M.gguf"
    lazyparams.convert("gguf:Q4_K_M", q8_file, dst, progress=False)
    reader = gguf.GGUFReader(dst)
    fields = {k: f.contents() for k, f in reader.fields.items()}
    assert fields["general.file_type"] == 15
    assert fields["general.quantization_version"] == 2
    assert fields["general.name"] == "m"
    widened = _dequantized(source)
    kinds = set()
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name.lower()
        kinds.add(kind)
        if kind == "f32":
            continue
        rows = widened[tensor.name].reshape(-1, widened[tensor.name].shape[-1])
        assert np.array_equal(
            np.asarray(tensor.data).reshape(rows.shape[0], -1),
            oracle.quantize(kind, rows.astype(np.float32)),
        )
    assert {"q4_k", "q6_k"} <= kinds


def test_gguf_to_safetensors_dequantizes_as_gguf_py(tmp_path: Path, q8_file: Path) -> None:
    dst = tmp_path / "back.safetensors"
    lazyparams.convert("cast:float32", q8_file, dst, progress=False)
    back = load_file(str(dst))
    expected = _dequantized(gguf.GGUFReader(q8_file))
    assert set(back) == set(expected)
    for name, values in expected.items():
        np.testing.assert_array_equal(back[name], values.astype(np.float32))
