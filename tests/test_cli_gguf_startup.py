"""Start-up of `lazyparams plan gguf[:TYPE]`: a plan of a Hugging Face folder reads no tensor data
and writes no metadata, so it needs neither numpy nor gguf-py nor the tokenizer libraries.

Each check runs in a fresh interpreter, since this one has imported all of them already.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.targets.llamacpp.hf_fixtures import write_model
from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer
from tests.test_cli_startup import _imported_after

# what writing a GGUF file needs and planning one must not load
NOT_FOR_GGUF_PLAN = ("numpy", "gguf", "ml_dtypes", "sentencepiece", "yaml", "safetensors")
# the target's modules that build metadata and read tokenizers, for convert only
METADATA_MODULES = (
    "lazyparams.targets.llamacpp.metadata",
    "lazyparams.targets.llamacpp.tokenizer",
    "lazyparams.io.gguf_metadata",
)


@pytest.fixture(name="model", scope="module")
def model_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small llama folder with a sentencepiece tokenizer, as a converter finds one."""
    folder = tmp_path_factory.mktemp("startup") / "tiny-llama"
    vocab = write_sentencepiece_tokenizer(folder, 400)
    return write_model(folder, "llama", vocab=vocab, hidden=256, intermediate=512)


@pytest.mark.parametrize("spec", ["gguf", "gguf:q8_0", "gguf:Q4_K_M"])
def test_plan_gguf_imports_neither_numpy_nor_gguf_nor_tokenizer_libraries(
    model: Path, spec: str
) -> None:
    result = _imported_after(["plan", spec, str(model)], ["plan", spec, str(model), "--json"])
    assert result["codes"] == [0, 0]
    assert "blk.*.attn_q.weight" in result["out"]  # the target's rows were printed
    assert [name for name in NOT_FOR_GGUF_PLAN if name in result["modules"]] == []
    assert [name for name in METADATA_MODULES if name in result["all"]] == []
