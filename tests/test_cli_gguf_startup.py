"""Start-up of `lazyparams plan gguf[:TYPE]`: a plan of a Hugging Face folder checks the metadata
and tokenizer as convert does (so that it refuses what convert refuses, which needs gguf-py's
vocabulary helpers and the tokenizer libraries), but reads no tensor data: it loads neither the
tensor readers' libraries nor ml_dtypes.

Each check runs in a fresh interpreter, since this one has imported all of them already.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.targets.llamacpp.hf_fixtures import write_model
from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer
from tests.test_cli_startup import _imported_after

# what reading and writing tensor data needs, and planning must not load
NOT_FOR_GGUF_PLAN = ("ml_dtypes", "safetensors", "lazyparams.runtime")


@pytest.fixture(name="model", scope="module")
def model_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small llama folder with a sentencepiece tokenizer, as a converter finds one."""
    folder = tmp_path_factory.mktemp("startup") / "tiny-llama"
    vocab = write_sentencepiece_tokenizer(folder, 400)
    return write_model(folder, "llama", vocab=vocab, hidden=256, intermediate=512)


@pytest.mark.parametrize("spec", ["gguf", "gguf:q8_0", "gguf:Q4_K_M"])
def test_plan_gguf_checks_the_tokenizer_but_reads_no_tensor_data(model: Path, spec: str) -> None:
    result = _imported_after(["plan", spec, str(model)], ["plan", spec, str(model), "--json"])
    assert result["codes"] == [0, 0]
    assert "blk.*.attn_q.weight" in result["out"]  # the target's rows were printed
    assert [name for name in NOT_FOR_GGUF_PLAN if name in result["all"]] == []
