"""Stacked experts within a budget below one stacked tensor: a mixture-of-experts checkpoint
converts expert by expert to the same GGUF bytes, at the peak the plan predicts."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyparams
from lazyparams.engine.demo_model import DEMO_PRE, write_byte_tokenizer
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.llamacpp.hf_fixtures import write_model

STACKED = "blk.0.ffn_gate_exps.weight"


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mixtral checkpoint of 8 experts of 256 x 128 in bfloat16, experts across 3 shards."""
    folder = tmp_path_factory.mktemp("moe") / "mixtral"
    write_model(folder, "mixtral", shards=3, hidden=128, intermediate=256, experts=8)
    write_byte_tokenizer(folder)
    return folder


@pytest.mark.parametrize("type_name", ["q8_0", "f16", "q4_k_m"])
def test_experts_stream_to_the_same_bytes_within_a_small_budget(
    moe: Path, tmp_path: Path, type_name: str
) -> None:
    target = GGUFTarget(type_name, pre=DEMO_PRE)
    whole = lazyparams.plan(target, moe, budget="none")
    expert = 256 * 128 * 2
    budget = 3 * expert + expert // 2  # below the stacked tensor of 8 experts
    assert whole.predicted_peak_bytes > budget
    streamed = lazyparams.plan(target, moe, budget=budget)
    assert streamed.fits, streamed.budget_message
    first, second = tmp_path / "whole.gguf", tmp_path / "streamed.gguf"
    lazyparams.convert(target, moe, first, budget="none", progress=False)
    result = lazyparams.convert(target, moe, second, budget=budget, progress=False)
    assert second.read_bytes() == first.read_bytes()
    assert result.measured_peak_bytes == streamed.predicted_peak_bytes <= budget


def test_the_minimum_budget_is_one_expert_not_the_stack(moe: Path) -> None:
    target = GGUFTarget("q8_0", pre=DEMO_PRE)
    stacked = 8 * 256 * 128 * 2
    plan = lazyparams.plan(target, moe, budget=stacked // 2)
    assert plan.fits
    assert plan.predicted_peak_bytes < stacked // 2
