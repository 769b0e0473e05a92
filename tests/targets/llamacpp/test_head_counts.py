"""A config whose head counts contradict the q/k projections is one line naming the tensor,
the config key and both row counts, before any data is read (llama.cpp could not load the
file the converter would write)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lazyparams
from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.hf_fixtures import write_model


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"num_attention_heads": 8},  # 64 / 8 = 8-wide heads: q's 64 rows fit, k's 32 do not
            r"'model\.layers\.0\.self_attn\.k_proj\.weight' has 32 rows; .* says "
            r"num_key_value_heads=2 heads of width 8 \(hidden_size 64 // num_attention_heads 8\), "
            r"expected 16 rows",
        ),
        (
            {"head_dim": 32, "num_key_value_heads": 1},  # k's 32 rows fit, q's 64 do not
            r"'model\.layers\.0\.self_attn\.q_proj\.weight' has 64 rows; .* says "
            r"num_attention_heads=4 heads of width 32 \(head_dim\), expected 128 rows",
        ),
    ],
)
def test_head_counts_that_contradict_the_projections_are_refused(
    tmp_path: Path, changes: dict[str, int], message: str
) -> None:
    folder = write_model(tmp_path / "m", "llama")  # hidden 64, 4 heads, 2 key-value heads
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    with pytest.raises(ConvertError, match=message):
        lazyparams.plan(GGUFTarget("q8_0"), folder)
