"""llama and Mistral write the attention key and value lengths as llama.cpp's converter does:
it reads config.json through transformers' config classes, which give `head_dim` a default."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import pytest

import lazyparams
from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.hf_fixtures import write_model


def _lengths(folder: Path, tmp_path: Path) -> tuple[int | None, int | None]:
    out = tmp_path / "m.gguf"
    lazyparams.convert(GGUFTarget("f16", pre=DEMO_PRE), folder, out, progress=False)
    fields = gguf.GGUFReader(out).fields

    def value(key: str) -> int | None:
        field = fields.get(key)
        return None if field is None else int(field.contents())

    return value("llama.attention.key_length"), value("llama.attention.value_length")


@pytest.mark.parametrize("kind", ["llama", "mistral"])
def test_lengths_default_to_the_width_of_a_head(tmp_path: Path, kind: str) -> None:
    folder = write_model(tmp_path / kind, kind, hidden=64, heads=4)
    write_byte_tokenizer(folder)
    assert "head_dim" not in json.loads((folder / "config.json").read_text())
    assert _lengths(folder, tmp_path) == (16, 16)


def test_a_head_dim_in_the_config_is_written_as_it_is(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama", hidden=64, heads=4, head_dim=32)
    write_byte_tokenizer(folder)
    assert json.loads((folder / "config.json").read_text())["head_dim"] == 32
    assert _lengths(folder, tmp_path) == (32, 32)
