"""The demo's checkpoint is a model folder every recipe converts, the `gguf` ones included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lazyparams.cli import main
from lazyparams.engine.demo import LlamaShape, run_demo
from lazyparams.errors import ConvertError
from tests.engine.helpers import read_all

SHAPE = LlamaShape(layers=2, hidden=128, intermediate=256, vocab=320)


@pytest.mark.parametrize("recipe", ["gguf", "gguf:Q4_K_M", "gguf:q8_0"])
def test_the_demo_converts_to_gguf(tmp_path: Path, recipe: str) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    gguf = pytest.importorskip("gguf")
    run = run_demo(tmp_path, SHAPE, spec=recipe, progress=False)
    assert run.report.plan.spec == (recipe if ":" in recipe else "gguf:auto")
    (path,) = (Path(f) for f in run.report.files)
    fields = gguf.GGUFReader(path).fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    assert len(fields["tokenizer.ggml.tokens"].contents()) == SHAPE.vocab
    assert fields["llama.attention.head_count"].contents() == 2  # heads of 64
    assert len(read_all(path)) == 3 + 9 * SHAPE.layers  # embedding, output norm and head


def test_the_demo_folder_holds_a_config_and_a_tokenizer(tmp_path: Path) -> None:
    run = run_demo(tmp_path, SHAPE, progress=False)
    folder = tmp_path / "llama"
    assert {"config.json", "tokenizer.json"} <= {p.name for p in folder.iterdir()}
    out = read_all(run.report.files[0])
    assert out["model.layers.0.self_attn.qkv_proj.weight"].dtype == np.float16


def test_a_vocabulary_too_small_for_the_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match="a vocabulary of 96 has no room"):
        run_demo(tmp_path, LlamaShape(1, 64, 128, 96), spec="gguf", progress=False)


def test_the_cli_demo_runs_a_gguf_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    args = ["--layers", "1", "--hidden", "128", "--intermediate", "256"]
    assert main(["demo", "--recipe", "gguf:Q4_K_M", "--no-progress", *args]) == 0
    out = capsys.readouterr().out
    assert "Q4_K_M (general.file_type 15)" in out and "measured peak (VM)" in out
