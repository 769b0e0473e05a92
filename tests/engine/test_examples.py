"""The example specs a user copies: each plans and converts the small llama checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lazyparams.engine import convert, plan
from tests.engine.helpers import EXAMPLES, SMALL, eager_fuse_cast, read_all, small_llama


@pytest.fixture(scope="module", name="llama_path")
def llama_path_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_llama(tmp_path_factory.mktemp("llama") / "ckpt")


def run(example: str, src: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    report = convert(str(EXAMPLES / example), src, out, progress=False)
    assert report.measured_peak_bytes == report.predicted_peak_bytes
    return out


def test_every_example_plans_in_less_memory_than_eager(llama_path: Path) -> None:
    examples = sorted(EXAMPLES.glob("*.py"))
    assert len(examples) >= 3
    for example in examples:
        the_plan = plan(str(example), llama_path)
        assert the_plan.predicted_peak_bytes < the_plan.eager_peak_bytes, example.name


def test_llama_fuse_qkv(llama_path: Path) -> None:
    out = run("llama_fuse_qkv.py", llama_path)
    expected = eager_fuse_cast(read_all(llama_path))
    expected["lm_head.weight"] = read_all(llama_path)["lm_head.weight"].astype(np.float16)
    assert sorted(out) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(out[name], value, err_msg=name)


def test_quantize_int8_linear(llama_path: Path) -> None:
    out = run("quantize_int8_linear.py", llama_path)
    name = "model.layers.1.mlp.up_proj.weight"
    assert out[name].dtype == np.int8 and out[f"{name}_scale"].shape == (SMALL.intermediate,)
    assert out["lm_head.weight"].dtype == np.float16


def test_llama_unpermute_rotary(llama_path: Path) -> None:
    out = run("llama_unpermute_rotary.py", llama_path)
    tensors = read_all(llama_path)
    name = "model.layers.0.self_attn.q_proj.weight"
    heads, d = 4, SMALL.hidden
    # Hugging Face permuted (heads, half, 2, d) -> (heads, 2, half, d); the example undoes it
    original = tensors[name].reshape(heads, 2, d // heads // 2, d).swapaxes(1, 2).reshape(d, d)
    np.testing.assert_array_equal(out[name], original)
    np.testing.assert_array_equal(out["model.norm.weight"], tensors["model.norm.weight"])
