"""Bad adapters and bad calls: each refused in one line naming the culprit, before any data is
read, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lazyparams
from lazyparams.errors import LazyParamsError
from tests.targets.lora.peft_reference import F32, lora_factors

Q0 = "model.layers.0.self_attn.q_proj"
V0 = "model.layers.0.self_attn.v_proj"


def factors(weights: dict[str, np.ndarray], module: str, rank: int = 4) -> dict[str, np.ndarray]:
    a, b = lora_factors(np.random.default_rng(0), weights[f"{module}.weight"], rank)
    return {f"{module}.lora_A.weight": a, f"{module}.lora_B.weight": b}


def refused(
    base: Path, adapters: list[Path], dst: Path, match: str, **options: Any
) -> LazyParamsError:
    with pytest.raises(LazyParamsError, match=match) as caught:
        lazyparams.merge_lora(base, adapters, dst, progress=False, **options)
    assert "\n" not in str(caught.value)
    assert not dst.exists()
    return caught.value


def test_a_weight_per_adapter(base, adapter, tmp_path):
    folder, weights = base
    path = adapter("a", factors(weights, Q0))
    refused(folder, [path], tmp_path / "out", "weights: 2 given for 1 adapters", weights=[1, 2])


def test_target_modules_that_match_no_tensor_of_the_base(base, adapter, tmp_path):
    folder, weights = base
    path = adapter("a", factors(weights, Q0), target_modules=["c_attn", "c_fc"])
    error = refused(folder, [path], tmp_path / "out", "target_modules c_attn, c_fc match no tensor")
    assert str(folder) in str(error) and "adapter_config.json" in str(error)


def test_a_module_the_base_does_not_have(base, adapter, tmp_path):
    folder, weights = base
    tensors = {k.replace("q_proj", "x_proj"): v for k, v in factors(weights, Q0).items()}
    error = refused(
        folder,
        [adapter("a", tensors)],
        tmp_path / "out",
        r"module 'model\.layers\.0\.self_attn\.x_proj' matches no tensor of the base",
    )
    assert str(folder) in str(error)


def test_factors_that_do_not_fit_the_base_weight(base, adapter, tmp_path):
    folder, weights = base
    a, b = lora_factors(np.random.default_rng(0), weights[f"{Q0}.weight"], 4)
    tensors = {f"{V0}.lora_A.weight": a, f"{V0}.lora_B.weight": b}  # q's shapes on v (4, 8)
    refused(
        folder,
        [adapter("a", tensors)],
        tmp_path / "out",
        r"lora_A is \(4, 8\) and lora_B \(8, 4\), the base weight .* is \(4, 8\); expected "
        r"lora_B @ lora_A of shape \(4, 8\)",
    )


def test_a_rank_other_than_the_configuration_says(base, adapter, tmp_path):
    folder, weights = base
    path = adapter("a", factors(weights, Q0, rank=4), r=8)
    refused(folder, [path], tmp_path / "out", r"gives it r = 8; expected rank 8")
    path = adapter("b", factors(weights, Q0, rank=4), r=4, rank_pattern={"q_proj": 2})
    refused(folder, [path], tmp_path / "out", r"gives it r = 2")


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"peft_type": "IA3"}, "peft_type 'IA3' is not supported; expected LORA"),
        ({"lora_bias": True}, "lora_bias = True is not supported"),
        ({"trainable_token_indices": [1, 2]}, "trainable_token_indices = .* is not supported"),
        ({"bias": "all"}, "bias = 'all' is not supported"),
        ({"r": 0}, "r 0: expected a positive integer"),
        ({"lora_alpha": "16"}, "lora_alpha '16': expected a number"),
        ({"use_dora": "yes"}, "use_dora 'yes': expected true or false"),
        ({"rank_pattern": {"q_proj": 0}}, "rank_pattern .*: expected a mapping"),
    ],
)
def test_a_configuration_it_cannot_merge_names_its_file(base, adapter, tmp_path, fields, match):
    folder, weights = base
    path = adapter("a", factors(weights, Q0), **fields)
    error = refused(folder, [path], tmp_path / "out", match)
    assert str(path / "adapter_config.json") in str(error)


def test_dora_parts_without_use_dora_and_the_reverse(base, adapter, tmp_path):
    folder, weights = base
    tensors = factors(weights, Q0)
    path = adapter("a", {**tensors, f"{Q0}.lora_magnitude_vector": np.ones(8, F32)})
    refused(folder, [path], tmp_path / "out", "a lora_magnitude_vector without use_dora: true")
    path = adapter("b", tensors, use_dora=True)
    refused(folder, [path], tmp_path / "out", "use_dora is true but it has no lora_magnitude")
    path = adapter("c", {**tensors, f"{Q0}.lora_magnitude_vector": np.ones(4, F32)}, use_dora=True)
    refused(folder, [path], tmp_path / "out", r"lora_magnitude_vector is \(4,\); expected \(8,\)")


def test_tensors_that_are_no_part_of_the_adapter(base, adapter, tmp_path):
    folder, weights = base
    tensors = {**factors(weights, Q0), "lm_head.weight": weights["lm_head.weight"]}
    refused(folder, [adapter("a", tensors)], tmp_path / "out", "nor a tensor of modules_to_save")
    only_a = {f"{Q0}.lora_A.weight": factors(weights, Q0)[f"{Q0}.lora_A.weight"]}
    refused(
        folder,
        [adapter("b", only_a)],
        tmp_path / "out",
        "has lora_A.weight; expected both lora_A and",
    )
    copy = {**factors(weights, Q0), "lm_head.weight": np.zeros((8, 8), F32)}
    path = adapter("c", copy, modules_to_save=["lm_head"])
    refused(
        folder, [path], tmp_path / "out", r"is \(8, 8\), the base's 'lm_head.weight' is \(16, 8\)"
    )


def test_a_folder_that_is_no_adapter(base, tmp_path):
    folder, _ = base
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(folder, [empty], tmp_path / "out", "adapter_config.json: not found")
    (empty / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 4})
    )
    refused(folder, [empty], tmp_path / "out", "no adapter_model.safetensors or adapter_model.bin")
    refused(folder, [tmp_path / "missing"], tmp_path / "out", "missing: no such folder")


def test_a_cluster_is_refused(base, adapter, tmp_path):
    folder, weights = base
    path = adapter("a", factors(weights, Q0))
    refused(folder, [path], tmp_path / "out", "runs on one machine", cluster="local:2")
