"""Start-up of `lazyparams plan gguf[:TYPE]`: a plan of a Hugging Face folder reads no tensor data
and writes no metadata, so it needs neither numpy nor gguf-py nor the tokenizer libraries.

Each check runs in a fresh interpreter, since this one has imported all of them already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine.helpers import cli_env
from tests.targets.llamacpp.hf_fixtures import write_model
from tests.targets.llamacpp.tokenizer_fixtures import write_sentencepiece_tokenizer

# what writing a GGUF file needs and planning one must not load
NOT_FOR_GGUF_PLAN = ("numpy", "gguf", "ml_dtypes", "sentencepiece", "yaml", "safetensors")
# the target's modules that build metadata and read tokenizers, for convert only
METADATA_MODULES = (
    "lazyparams.targets.llamacpp.metadata",
    "lazyparams.targets.llamacpp.tokenizer",
    "lazyparams.io.gguf_metadata",
)

_IMPORTED_AFTER = """
import contextlib, io, json, sys
from lazyparams.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    codes = [main(argv) for argv in json.loads(sys.argv[1])]
top = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"codes": codes, "modules": top, "all": sorted(sys.modules), "out": out.getvalue()}))
"""


def _imported_after(*argvs: list[str]) -> dict[str, list[str]]:
    """Run the command lines `argvs` in one fresh interpreter; their exit codes and imports."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_AFTER, json.dumps(argvs)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


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
