"""`plan gguf` refuses what `convert gguf` refuses before reading data (no tokenizer, an unknown
BPE pre-tokenizer, a config the recipe cannot read), with the same message; a plan that
succeeds converts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hf_fixtures import write_model
from tokenizer_fixtures import write_bpe_tokenizer

import lazyparams
from lazyparams.cli import main
from lazyparams.errors import LazyParamsError

pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")


@pytest.fixture(scope="module", name="bpe")
def bpe_fixture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A trained Qwen2-style tokenizer, whose pre-tokenizer hash llama.cpp does not know."""
    folder = tmp_path_factory.mktemp("tokenizer")
    return folder, write_bpe_tokenizer(folder, 400, "qwen2")


def _model(root: Path, tokenizer: Path | None, vocab: int = 400) -> Path:
    folder = write_model(root / "tiny-qwen2", "qwen2", vocab=vocab)
    for file in tokenizer.iterdir() if tokenizer is not None else ():
        (folder / file.name).write_bytes(file.read_bytes())
    return folder


def _refusals(spec: str, folder: Path, dst: Path) -> tuple[str, str]:
    """The messages with which plan and convert refuse `spec` on `folder`."""
    with pytest.raises(LazyParamsError) as planned:
        lazyparams.plan(spec, folder)
    with pytest.raises(LazyParamsError) as converted:
        lazyparams.convert(spec, folder, dst, progress=False)
    assert not dst.exists()
    return str(planned.value), str(converted.value)


def test_no_tokenizer_is_refused_by_plan_as_by_convert(tmp_path: Path) -> None:
    folder = _model(tmp_path, None)
    planned, converted = _refusals("gguf", folder, tmp_path / "out.gguf")
    assert planned == converted
    assert "tokenizer.json: not found" in planned


def test_unknown_pre_tokenizer_is_refused_by_plan_as_by_convert(
    tmp_path: Path, bpe: tuple[Path, int]
) -> None:
    folder = _model(tmp_path, bpe[0], bpe[1])
    planned, converted = _refusals("gguf:f16", folder, tmp_path / "out.gguf")
    assert planned == converted
    assert "BPE pre-tokenizer not recognized" in planned and "--gguf-pre" in planned


def test_a_tokenizer_past_the_config_vocab_is_refused_by_plan(
    tmp_path: Path, bpe: tuple[Path, int]
) -> None:
    folder = _model(tmp_path, bpe[0], vocab=bpe[1] - 8)
    planned, converted = _refusals("gguf:f16", folder, tmp_path / "out.gguf")
    assert planned == converted and "past config.json's vocab_size" in planned


def test_the_cli_plan_exits_1_naming_the_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bpe: tuple[Path, int]
) -> None:
    folder = _model(tmp_path, bpe[0], bpe[1])
    assert main(["plan", "gguf", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "BPE pre-tokenizer not recognized" in err
    assert main(["plan", "gguf", str(folder), "--gguf-pre", "qwen2"]) == 0


def test_a_plan_that_succeeds_converts(tmp_path: Path, bpe: tuple[Path, int]) -> None:
    folder = _model(tmp_path, bpe[0], bpe[1])
    spec = lazyparams.engine.specs.gguf_target("f16", pre="qwen2")
    the_plan = lazyparams.plan(spec, folder)
    report = lazyparams.convert(spec, folder, tmp_path / "out.gguf", progress=False)
    assert report.plan.outputs == the_plan.outputs


def test_the_partitioned_plan_refuses_it_too(tmp_path: Path) -> None:
    from lazyparams.engine.partition import partition

    folder = _model(tmp_path, None)
    with pytest.raises(LazyParamsError, match=r"tokenizer\.json: not found"):
        partition("gguf", folder, workers=2)
