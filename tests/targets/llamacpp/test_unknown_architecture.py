"""An architecture the gguf recipe does not know is one line naming it, the known ones and
the contributor's guide that says how to add it, before any data is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lazyparams
from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.architectures import GUIDE, SUPPORTED
from tests.targets.llamacpp.hf_fixtures import write_model

REPOSITORY = Path(__file__).resolve().parents[3]


def test_an_unknown_architecture_lists_the_known_ones_and_the_guide(tmp_path: Path) -> None:
    folder = write_model(tmp_path / "m", "llama")
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["NoSuchModelForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConvertError) as err:
        lazyparams.plan("gguf:q8_0", folder)
    message = str(err.value)
    assert "'NoSuchModelForCausalLM' is not supported" in message
    assert all(name in message for name in SUPPORTED) and GUIDE in message
    assert (REPOSITORY / GUIDE).is_file()
