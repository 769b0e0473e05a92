"""Pre-quantized checkpoints dequantized in the traced program: fp8 (block and per-tensor
scales) and compressed-tensors folders, made with the published formulas, converted to a
bfloat16 Hugging Face folder and to GGUF; every value against numpy's product, the GGUF against
the conversion of the same weights dequantized beforehand, the blocks of rows under a small
budget, and each bad input refused in one line before anything is written."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lazyparams
from lazyparams.errors import CheckpointError
from lazyparams.io import open_source
from lazyparams.targets.llamacpp.target import GGUFTarget
from tests.targets.dequantize.fixtures import compressed_model, fp8_model
from tests.targets.llamacpp.hf_fixtures import write_checkpoint
from tests.targets.llamacpp.tokenizer_fixtures import write_bpe_tokenizer

BF16 = ml_dtypes.bfloat16
W = "model.layers.0.self_attn.q_proj.weight"


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    with open_source(folder) as source:
        return {name: source.load(name) for name in source.names()}


def _expanded(scale: np.ndarray, shape: tuple[int, ...], block: tuple[int, int]) -> np.ndarray:
    """A block scale repeated over its block and cut to the weight's shape."""
    return np.repeat(np.repeat(scale, block[0], 0), block[1], 1)[: shape[0], : shape[1]]


def dequantized(source: dict[str, np.ndarray], suffix: str, block: Any) -> dict[str, np.ndarray]:
    """numpy's float32 product of every scaled weight, the other tensors as stored."""
    out = {}
    for name, value in source.items():
        scale = source.get(name + suffix)
        if name.endswith((suffix, ".input_scale")):
            continue
        if scale is None:
            out[name] = value
        elif block is None:
            out[name] = value.astype(np.float32) * scale.astype(np.float32)
        else:
            wide = _expanded(scale.astype(np.float32), value.shape, block)
            out[name] = value.astype(np.float32) * wide
    return out


def test_fp8_blocks_to_a_bfloat16_folder(tmp_path: Path) -> None:
    src = fp8_model(tmp_path / "fp8")
    source = _tensors(src)
    assert source[W].dtype == ml_dtypes.float8_e4m3fn
    assert source[W + "_scale_inv"].shape == (math.ceil(128 / 48), math.ceil(64 / 40))
    lazyparams.convert("cast:bfloat16", src, tmp_path / "bf16", progress=False)
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert "quantization_config" not in config and config["torch_dtype"] == "bfloat16"
    got = _tensors(tmp_path / "bf16")
    want = dequantized(source, "_scale_inv", (48, 40))
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name].dtype == BF16
        np.testing.assert_array_equal(got[name].view(np.uint16), value.astype(BF16).view(np.uint16))


def test_the_plan_runs_dequantized_weights_in_blocks_of_rows(tmp_path: Path) -> None:
    src = fp8_model(tmp_path / "fp8", block=(128, 128))
    whole = lazyparams.plan("cast:bfloat16", src)
    one_weight = 128 * 64 * 4  # the widest dequantized weight in float32
    small = lazyparams.plan("cast:bfloat16", src, budget=one_weight)
    assert small.predicted_peak_bytes < one_weight < whole.predicted_peak_bytes
    dst: dict[str, np.ndarray] = {}
    lazyparams.convert("cast:float32", src, dst, budget=one_weight, progress=False)
    want = dequantized(_tensors(src), "_scale_inv", (128, 128))
    for name, value in want.items():
        np.testing.assert_array_equal(dst[name], value.astype(np.float32))


def test_fp8_per_tensor_scale(tmp_path: Path) -> None:
    src = fp8_model(tmp_path / "fp8", block=None)
    dst: dict[str, np.ndarray] = {}
    lazyparams.convert("cast:float32", src, dst, progress=False)
    want = dequantized(_tensors(src), "_scale_inv", None)
    assert set(dst) == set(want)
    np.testing.assert_array_equal(dst[W], want[W])


@pytest.mark.parametrize("scheme", ["fp8-channel", "fp8-block", "int8-channel"])
def test_compressed_tensors(tmp_path: Path, scheme: str) -> None:
    src = compressed_model(tmp_path / "ct", scheme)
    dst: dict[str, np.ndarray] = {}
    lazyparams.convert("cast:float32", src, dst, progress=False)
    block = (48, 40) if scheme == "fp8-block" else None
    want = dequantized(_tensors(src), "_scale", block)
    assert set(dst) == set(want)  # scales and input scales gone
    for name, value in want.items():
        np.testing.assert_array_equal(dst[name], value.astype(np.float32))


def test_gguf_of_fp8_equals_gguf_of_the_weights_dequantized_first(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers", reason="the llamacpp extra (tokenizers) is not installed")
    gguf = pytest.importorskip("gguf")
    tokenizer = tmp_path / "tok"
    vocab = write_bpe_tokenizer(tokenizer, 320, "qwen2")
    src = fp8_model(tmp_path / "fp8")
    source = _tensors(src)
    config = json.loads((src / "config.json").read_text())
    del config["quantization_config"]
    widened = {
        n: v.astype(np.float32) for n, v in dequantized(source, "_scale_inv", (48, 40)).items()
    }
    plain = write_checkpoint(tmp_path / "plain", widened, config)  # one dtype: the names' order
    for folder in (src, plain):
        for file in tokenizer.iterdir():
            (folder / file.name).write_bytes(file.read_bytes())
    assert vocab == 320
    readers = []
    for folder in (src, plain):
        lazyparams.convert(
            GGUFTarget("q8_0", pre="qwen2"), folder, folder / "m.gguf", progress=False
        )
        readers.append(gguf.GGUFReader(folder / "m.gguf"))
    fp8, ref = ({t.name: t for t in r.tensors} for r in readers)
    assert list(fp8) == list(ref)
    assert fp8["blk.0.attn_q.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    for name, tensor in ref.items():
        assert bytes(fp8[name].data) == bytes(tensor.data), name


def _rewrite(folder: Path, tensors: dict[str, np.ndarray] | None = None, **quant: Any) -> Path:
    """`folder` with its tensors or quantization_config keys replaced."""
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"].update(quant)
    for file in folder.glob("*.safetensors*"):
        file.unlink()
    write_checkpoint(folder, tensors if tensors is not None else {}, config)
    return folder


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"drop": W + "_scale_inv"}, f"{W}' is float8_e4m3fn without a scale; expected '{W}_scale_inv'"),
        ({"scale": np.ones((2, 2), np.float32)}, r"has shape \[2, 2\]; expected ceil\(\[128, 64\] / \[48, 40\]\) = \[3, 2\]"),
        ({"weight_block_size": [0, 128]}, r"weight_block_size: \[0, 128\]: expected two positive integers"),
        ({"weight_block_size": [128]}, r"weight_block_size: \[128\]: expected two positive integers"),
        ({"quant_method": "awq"}, "quant_method 'awq' is not supported; expected one of: fp8"),
        ({"fmt": "e2m1"}, "fmt 'e2m1' is not supported"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_before_anything_is_written(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    src = fp8_model(tmp_path / "fp8")
    tensors = _tensors(src)
    if "drop" in change:
        del tensors[change.pop("drop")]
    if "scale" in change:
        tensors[W + "_scale_inv"] = change.pop("scale")
    _rewrite(src, tensors, **change)
    with pytest.raises(CheckpointError, match=message) as caught:
        lazyparams.convert("cast:bfloat16", src, tmp_path / "out", progress=False)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_scale_without_its_weight_is_named(tmp_path: Path) -> None:
    src = fp8_model(tmp_path / "fp8")
    tensors = _tensors(src)
    tensors["model.layers.0.extra.weight_scale_inv"] = np.ones((1, 1), np.float32)
    _rewrite(src, tensors)
    with pytest.raises(
        CheckpointError, match=r"'model\.layers\.0\.extra\.weight_scale_inv' scales no"
    ):
        lazyparams.plan("cast:bfloat16", src)


def test_compressed_tensors_options_not_supported_are_named(tmp_path: Path) -> None:
    src = compressed_model(tmp_path / "ct", "int8-channel")
    config = json.loads((src / "config.json").read_text())
    weights = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    weights["symmetric"] = False
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"weights: symmetric False is not supported"):
        lazyparams.plan("cast:bfloat16", src)
    weights.update(symmetric=True, strategy="tensor_group")
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"strategy: 'tensor_group' is not supported"):
        lazyparams.plan("cast:bfloat16", src)
    config["quantization_config"]["format"] = "marlin-24"
    (src / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"format: 'marlin-24' is not supported"):
        lazyparams.plan("cast:bfloat16", src)


def test_activation_only_scheme_needs_nothing(tmp_path: Path) -> None:
    src = compressed_model(tmp_path / "ct", "int8-channel")
    tensors = {n: v for n, v in _tensors(src).items() if not n.endswith("_scale")}
    tensors = {n: v.astype(np.float32) if v.dtype == np.int8 else v for n, v in tensors.items()}
    config = json.loads((src / "config.json").read_text())
    del config["quantization_config"]["config_groups"]["group_0"]["weights"]
    (src / "config.json").write_text(json.dumps(config))
    config_q = config["quantization_config"]
    _rewrite(src, tensors, **config_q)
    dst: dict[str, np.ndarray] = {}
    lazyparams.convert("cast:float32", src, dst, progress=False)
    assert not any(n.endswith(".input_scale") for n in dst)
    np.testing.assert_array_equal(dst[W], tensors[W])
