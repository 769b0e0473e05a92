"""adapter_config.json as the merge reads it: PEFT's matching of module names (target_modules
as names or a regular expression, exclude_modules, modules_to_save, rank and alpha patterns)
and the scaling it gives each module."""

from __future__ import annotations

import json
import math

from lazyparams.io.lora_adapter import read_adapter_config
from tests.targets.lora.peft_reference import adapter_config

Q = "model.layers.0.self_attn.q_proj"
V = "model.layers.10.self_attn.v_proj"


def read(tmp_path, **fields):
    (tmp_path / "adapter_config.json").write_text(json.dumps(adapter_config(**fields)))
    return read_adapter_config(tmp_path)


def test_target_modules_match_name_endings_or_a_whole_name_pattern(tmp_path):
    listed = read(
        tmp_path, target_modules=["q_proj", "mlp"], exclude_modules=["layers.1.self_attn.q_proj"]
    )
    assert listed.targets(Q) and not listed.targets(V)
    assert not listed.targets("model.layers.1.self_attn.q_proj")  # excluded
    assert not listed.targets("model.layers.0.self_attn.xq_proj")  # an ending after a dot only
    pattern = read(tmp_path, target_modules=r".*layers\.1\d\..*_proj")
    assert pattern.targets(V) and not pattern.targets(Q)


def test_modules_to_save_name_a_module_or_one_inside_it(tmp_path):
    config = read(tmp_path, modules_to_save=["lm_head", "norm"])
    assert config.saves("lm_head") and config.saves("model.norm")
    assert not config.saves("model.layers.0.input_layernorm")


def test_the_first_matching_pattern_gives_rank_and_alpha(tmp_path):
    config = read(
        tmp_path,
        r=8,
        lora_alpha=16,
        rank_pattern={"layers.10.self_attn.v_proj": 2, "v_proj": 4},
        alpha_pattern={"q_proj": 4},
    )
    assert (config.rank_of(V), config.rank_of("model.layers.1.self_attn.v_proj")) == (2, 4)
    assert config.rank_of(Q) == 8
    assert config.scaling(Q) == 4 / 8 and config.scaling(V, weight=0.5) == 0.5 * 16 / 2
    rs = read(tmp_path, r=8, lora_alpha=16, use_rslora=True)
    assert rs.scaling(Q, weight=3.0) == 3.0 * 16 / math.sqrt(8)


def test_bookkeeping_keys_are_ignored_and_features_left_off_accepted(tmp_path):
    config = read(
        tmp_path,
        layers_to_transform=[0, 1],
        init_lora_weights="gaussian",
        lora_dropout=0.1,
        use_qalora=False,
        layer_replication=None,
        target_parameters=[],
    )
    assert (config.r, config.lora_alpha, config.use_dora) == (4, 16, False)
