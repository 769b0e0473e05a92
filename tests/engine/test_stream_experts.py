"""Stacked experts within a budget below one expert: a mixture-of-experts checkpoint converts
expert by expert, each expert in blocks of its rows, to the same GGUF bytes, at the peak the
plan predicts."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyparams
from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.hf_fixtures import write_model

EXPERT = 1024 * 64 * 2
"""Bytes of one expert's matrix in the checkpoint (1024 x 64, bfloat16)."""


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mixtral checkpoint of 8 experts of 1024 x 64 in bfloat16, across 3 shards."""
    folder = tmp_path_factory.mktemp("moe") / "mixtral"
    write_model(folder, "mixtral", shards=3, hidden=64, intermediate=1024, experts=8)
    write_byte_tokenizer(folder)
    return folder


@pytest.mark.parametrize("type_name", ["q8_0", "f16", "q4_k_m"])
def test_experts_stream_in_blocks_to_the_same_bytes_below_one_expert(
    moe: Path, tmp_path: Path, type_name: str
) -> None:
    target = GGUFTarget(type_name, pre=DEMO_PRE)
    whole = lazyparams.plan(target, moe, budget="none")
    budget = EXPERT // 2
    assert whole.predicted_peak_bytes > 8 * EXPERT > budget
    streamed = lazyparams.plan(target, moe, budget=budget)
    assert streamed.fits, streamed.budget_message
    first, second = tmp_path / "whole.gguf", tmp_path / "streamed.gguf"
    lazyparams.convert(target, moe, first, budget="none", progress=False)
    result = lazyparams.convert(target, moe, second, budget=budget, progress=False)
    assert second.read_bytes() == first.read_bytes()
    assert result.measured_peak_bytes == streamed.predicted_peak_bytes <= budget


def test_a_stack_that_fits_is_left_whole(moe: Path) -> None:
    target = GGUFTarget("q8_0", pre=DEMO_PRE)
    roomy = lazyparams.plan(target, moe, budget=64 * EXPERT)
    assert "set_item_rows" not in roomy.module.script()
