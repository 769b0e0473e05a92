"""`lazyparams inspect FILE`: a checkpoint's metadata, tensors and totals without reading its
tensors, for GGUF files (types lazyparams cannot read listed too) and any other format."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np

import lazyparams
from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
from lazyparams.engine.inspection import SHOWN_ITEMS, inspect_checkpoint, summarised
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.engine.helpers import run_cli
from tests.targets.llamacpp.hf_fixtures import write_model


def _gguf_with_an_unreadable_type(path: Path) -> None:
    """A GGUF file holding an F32 tensor, an IQ4_XS one (raw blocks) and a long array."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.block_count", 1)
    writer.add_array("tokenizer.ggml.scores", [float(i) for i in range(20)])
    writer.add_tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3))
    blocks = np.zeros((2, 136), np.uint8)  # 2 rows of one 256-value IQ4_XS block
    writer.add_tensor("b", blocks, raw_dtype=gguf.GGMLQuantizationType.IQ4_XS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_file_lists_its_pairs_with_types_and_every_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    _gguf_with_an_unreadable_type(path)
    found = inspect_checkpoint(path)
    pairs = {m.key: (m.kind, m.value) for m in found.metadata}
    assert pairs["llama.block_count"] == ("UINT32", 1)
    assert pairs["tokenizer.ggml.scores"] == (
        "ARRAY[FLOAT32]",
        {"items": 20, "first": [float(i) for i in range(SHOWN_ITEMS)]},
    )
    tensors = {t.name: (t.shape, t.dtype, t.nbytes) for t in found.tensors}
    assert tensors == {"a": ((2, 3), "F32", 24), "b": ((2, 256), "IQ4_XS", 272)}
    assert found.totals() == {"IQ4_XS": (1, 272), "F32": (1, 24)}


def test_the_command_prints_text_and_json(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama")
    write_byte_tokenizer(folder)
    lazyparams.convert(
        GGUFTarget("q8_0", pre=DEMO_PRE), folder, tmp_path / "m.gguf", progress=False
    )
    text = run_cli("inspect", tmp_path / "m.gguf", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "general.architecture" in text.stdout and "Q8_0" in text.stdout
    assert "tokenizer.ggml.tokens" in text.stdout and "items" in text.stdout
    data = json.loads(run_cli("inspect", folder, "--json", cwd=tmp_path).stdout)
    assert data["tensor_count"] == len(data["tensors"]) > 0
    assert data["total_bytes"] == sum(t["bytes"] for t in data["tensors"])
    assert {t["type"] for t in data["tensors"]} == {"bfloat16"}
    missing = run_cli("inspect", tmp_path / "absent.gguf", cwd=tmp_path)
    assert missing.returncode == 1 and "absent.gguf" in missing.stderr


def test_values_are_summarised_as_plain_data() -> None:
    assert summarised(np.arange(3, dtype=np.int32)) == [0, 1, 2]
    assert summarised("café".encode()) == "café"
    assert summarised(list(range(10)))["items"] == 10
