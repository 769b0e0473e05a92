"""`lazyparams merge-lora` and `lazyparams extract-lora` on the command line: the files they
write, their options, and one-line errors with nothing written."""

from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load_file

from lazyparams.cli import main
from tests.targets.lora.peft_reference import PREFIX, lora_factors, peft_add, peft_delta

Q0 = "model.layers.0.self_attn.q_proj"


def test_merge_lora_writes_a_hugging_face_folder_with_weighted_adapters(base, adapter, tmp_path):
    folder, weights = base
    rng = np.random.default_rng(1)
    (a1, b1), (a2, b2) = (lora_factors(rng, weights[f"{Q0}.weight"], 4) for _ in range(2))
    first = adapter("a", {f"{Q0}.lora_A.weight": a1, f"{Q0}.lora_B.weight": b1})
    second = adapter("b", {f"{Q0}.lora_A.weight": a2, f"{Q0}.lora_B.weight": b2}, lora_alpha=8)
    dst = tmp_path / "out"
    words = ["merge-lora", folder, first, second, dst, "--weights=-0.5,2", "--no-progress"]
    assert main([str(w) for w in words]) == 0
    q = peft_add(weights[f"{Q0}.weight"], peft_delta(a1, b1, -0.5 * 16 / 4, False))
    q = peft_add(q, peft_delta(a2, b2, 2 * 8 / 4, False))
    np.testing.assert_array_equal(load_file(str(dst / "model.safetensors"))[f"{Q0}.weight"], q)
    assert sorted(p.name for p in dst.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
    ]


def test_merge_lora_errors_are_one_line_and_write_nothing(base, adapter, tmp_path, capsys):
    folder, weights = base
    a, b = lora_factors(np.random.default_rng(2), weights[f"{Q0}.weight"], 4)
    path = adapter("a", {f"{Q0}.lora_A.weight": a, f"{Q0}.lora_B.weight": b})
    dst = tmp_path / "out"
    words = ["merge-lora", folder, path, dst, "--weights", "1,2", "--no-progress"]
    assert main([str(w) for w in words]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: weights: 2 given for 1 adapters") and err.count("\n") == 1
    assert not dst.exists()
    assert main(["merge-lora", str(folder), str(dst)]) == 2  # no adapter
    assert main(["merge-lora", str(folder), str(path), str(dst), "--weights", "x"]) == 2
    assert not dst.exists()


def test_extract_lora_writes_an_adapter_folder(base, tmp_path):
    from tests.targets.lora.peft_reference import write_base

    folder, weights = base
    tuned = {k: v + np.float32(0.01) for k, v in weights.items()}
    write_base(tmp_path / "tuned", tuned)
    dst = tmp_path / "adapter"
    words = ["extract-lora", folder, tmp_path / "tuned", dst, "--rank", "2", "--no-progress"]
    assert main([str(w) for w in [*words, "--save-module", "lm_head"]]) == 0
    assert sorted(p.name for p in dst.iterdir()) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]
    config = json.loads((dst / "adapter_config.json").read_text())
    assert config["r"] == 2 and config["modules_to_save"] == ["lm_head"]
    tensors = load_file(str(dst / "adapter_model.safetensors"))
    np.testing.assert_array_equal(tensors[f"{PREFIX}lm_head.weight"], tuned["lm_head.weight"])
    assert main([str(w) for w in words]) == 1  # DST exists now
