"""Built-in recipes on real layouts (Hugging Face llama and BERT names), composition, SPECs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.engine import convert, load_spec, recipe
from lazyparams.engine.recipes import cast, fuse_qkv, quantize_int4, quantize_int8
from lazyparams.errors import ConvertError
from lazyparams.frontend import trace
from lazyparams.io import DictSource
from lazyparams.targets.llamacpp.outtype import output_type
from tests.engine.helpers import SMALL, bert_tensors, read_all, small_llama


@pytest.fixture(scope="module", name="llama")
def llama_fixture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    return read_all(small_llama(tmp_path_factory.mktemp("llama") / "ckpt"))


def run(spec: Any, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    convert(spec, DictSource(tensors), out, progress=False)
    return out


def dequantize_int8(q: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray:
    shape = [1] * q.ndim
    shape[axis] = -1
    return q.astype(np.float32) * scale.reshape(shape)


def dequantize_int4(packed: np.ndarray, scale: np.ndarray, group: int) -> np.ndarray:
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[0], -1)
    values = np.where(nibbles >= 8, nibbles.astype(np.int16) - 16, nibbles).astype(np.float32)
    return values * np.repeat(scale, group, axis=1)


def assert_quantized(x: np.ndarray, deq: np.ndarray, scale_like: np.ndarray) -> None:
    """Every dequantized value is within half a step of the original."""
    assert np.all(np.abs(deq - x) <= scale_like / 2 + 1e-6)


# fuse-qkv ------------------------------------------------------------------------------------


def test_fuse_qkv_on_llama_fuses_groups_and_transposes_linear_weights(
    llama: dict[str, np.ndarray],
) -> None:
    out = run("fuse-qkv", llama)
    d, f = SMALL.hidden, SMALL.intermediate
    for layer in range(SMALL.layers):
        p = f"model.layers.{layer}."
        qkv = np.concatenate([llama[f"{p}self_attn.{n}_proj.weight"] for n in "qkv"], axis=0)
        np.testing.assert_array_equal(out[f"{p}self_attn.qkv_proj.weight"], qkv.T)
        gate_up = np.concatenate([llama[f"{p}mlp.{n}_proj.weight"] for n in ("gate", "up")])
        np.testing.assert_array_equal(out[f"{p}mlp.gate_up_proj.weight"], gate_up.T)
        assert out[f"{p}mlp.gate_up_proj.weight"].shape == (d, 2 * f)
        for name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
            np.testing.assert_array_equal(out[p + name], llama[p + name].T)
        np.testing.assert_array_equal(
            out[f"{p}input_layernorm.weight"], llama[f"{p}input_layernorm.weight"]
        )
        assert f"{p}self_attn.q_proj.weight" not in out and f"{p}mlp.up_proj.weight" not in out
    np.testing.assert_array_equal(out["lm_head.weight"], llama["lm_head.weight"].T)
    np.testing.assert_array_equal(
        out["model.embed_tokens.weight"], llama["model.embed_tokens.weight"]
    )


def test_fuse_qkv_puts_each_fused_tensor_where_its_first_member_was() -> None:
    tensors = {
        "model.layers.0.input_layernorm.weight": np.ones(4, np.float32),
        "model.layers.0.self_attn.q_proj.weight": np.ones((4, 4), np.float32),
        "model.layers.0.self_attn.o_proj.weight": np.ones((4, 4), np.float32),
        "model.layers.0.self_attn.k_proj.weight": np.ones((2, 4), np.float32),
        "model.layers.0.self_attn.v_proj.weight": np.ones((2, 4), np.float32),
    }
    assert list(run("fuse-qkv", tensors)) == [
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.self_attn.qkv_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
    ]
    # grouped-query attention: k and v have fewer rows than q
    assert run("fuse-qkv", tensors)["model.layers.0.self_attn.qkv_proj.weight"].shape == (4, 8)


def test_fuse_qkv_on_bert_fuses_weights_and_biases() -> None:
    bert = bert_tensors()
    out = run("fuse-qkv", bert)
    p = "bert.encoder.layer.0."
    names = [f"{p}attention.self.{n}" for n in ("query", "key", "value")]
    weight = np.concatenate([bert[f"{n}.weight"] for n in names])
    np.testing.assert_array_equal(out[f"{p}attention.self.qkv.weight"], weight.T)
    bias = np.concatenate([bert[f"{n}.bias"] for n in names])
    np.testing.assert_array_equal(out[f"{p}attention.self.qkv.bias"], bias)
    for name in (
        "attention.output.dense.weight",
        "intermediate.dense.weight",
        "output.dense.weight",
    ):
        np.testing.assert_array_equal(out[p + name], bert[p + name].T)
    np.testing.assert_array_equal(
        out[f"{p}intermediate.dense.bias"], bert[f"{p}intermediate.dense.bias"]
    )
    emb = "bert.embeddings.word_embeddings.weight"
    np.testing.assert_array_equal(out[emb], bert[emb])
    assert not any(".query." in n or ".key." in n for n in out)


# quantize ------------------------------------------------------------------------------------


def test_quantize_int8_is_per_output_channel_with_scales(llama: dict[str, np.ndarray]) -> None:
    out = run("quantize-int8", llama)
    name = "model.layers.0.mlp.gate_proj.weight"
    q, scale = out[name], out[f"{name}_scale"]
    assert q.dtype == np.int8 and scale.shape == (SMALL.intermediate,)
    np.testing.assert_allclose(scale, np.abs(llama[name]).max(axis=1) / 127, rtol=1e-6)
    assert_quantized(llama[name], dequantize_int8(q, scale, 0), scale[:, None])
    emb, norm = "model.embed_tokens.weight", "model.norm.weight"
    assert out[emb].dtype == np.float32 and f"{emb}_scale" not in out
    np.testing.assert_array_equal(out[norm], llama[norm])


def test_quantize_int8_after_fuse_qkv_scales_the_output_channels(
    llama: dict[str, np.ndarray],
) -> None:
    out = run("fuse-qkv+quantize-int8", llama)
    name = "model.layers.1.self_attn.qkv_proj.weight"
    q, scale = out[name], out[f"{name}_scale"]
    p = "model.layers.1.self_attn."
    fused = np.concatenate([llama[f"{p}{n}_proj.weight"] for n in "qkv"]).T  # (in, out)
    assert q.shape == fused.shape and scale.shape == (3 * SMALL.hidden,)
    assert_quantized(fused, dequantize_int8(q, scale, 1), scale[None, :])


def test_quantize_int4_packs_two_values_a_byte_per_group(llama: dict[str, np.ndarray]) -> None:
    out = run("quantize-int4:16", llama)
    name = "model.layers.0.mlp.down_proj.weight"  # (d, f)
    packed, scale = out[name], out[f"{name}_scale"]
    assert packed.dtype == np.uint8 and packed.shape == (SMALL.hidden, SMALL.intermediate // 2)
    assert scale.shape == (SMALL.hidden, SMALL.intermediate // 16)
    deq = dequantize_int4(packed, scale, 16)
    assert_quantized(llama[name], deq, np.repeat(scale, 16, axis=1))


def test_quantize_int4_defaults_to_groups_of_32_and_skips_what_does_not_split() -> None:
    tensors = {"a.weight": np.ones((4, 64), np.float32), "b.weight": np.ones((4, 48), np.float32)}
    out = run("quantize-int4", tensors)
    assert out["a.weight_scale"].shape == (4, 2)
    assert out["b.weight"].dtype == np.float32 and "b.weight_scale" not in out


def test_quantize_int4_after_fuse_qkv_groups_along_the_input_dim(
    llama: dict[str, np.ndarray],
) -> None:
    out = run("fuse-qkv+quantize-int4", llama)
    name = "model.layers.0.mlp.gate_up_proj.weight"
    p = "model.layers.0.mlp."
    fused = np.concatenate([llama[f"{p}gate_proj.weight"], llama[f"{p}up_proj.weight"]])
    packed, scale = out[name], out[f"{name}_scale"]
    assert packed.shape == (2 * SMALL.intermediate, SMALL.hidden // 2)  # back to (out, in/2)
    assert_quantized(fused, dequantize_int4(packed, scale, 32), np.repeat(scale, 32, axis=1))


# cast ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "dtype"),
    [
        ("float16", np.float16),
        ("bfloat16", ml_dtypes.bfloat16),
        ("float8", ml_dtypes.float8_e4m3fn),
        ("float8_e5m2", ml_dtypes.float8_e5m2),
        ("f16", np.float16),  # the short spellings gguf:TYPE takes too
        ("FP16", np.float16),
        ("bf16", ml_dtypes.bfloat16),
        ("f32", np.float32),
    ],
)
def test_cast_converts_every_float_tensor(argument: str, dtype: Any) -> None:
    tensors = {"w": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), "ids": np.arange(3)}
    out = run(f"cast:{argument}", tensors)
    np.testing.assert_array_equal(out["w"], tensors["w"].astype(dtype))
    assert out["w"].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out["ids"], tensors["ids"])


def test_cast_defaults_to_float16_and_composes_after_quantize(llama: dict[str, np.ndarray]) -> None:
    out = run("quantize-int8+cast", llama)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert out[name].dtype == np.int8
    assert out[f"{name}_scale"].dtype == np.float16
    assert out["model.norm.weight"].dtype == np.float16


# the recipe functions ------------------------------------------------------------------------


def test_recipe_functions_trace_on_their_own() -> None:
    specs = {"w.weight": ((4, 64), "float32"), "x_proj.weight": ((8, 64), "float32")}
    for fn in (fuse_qkv, quantize_int8, quantize_int4, cast):
        mod = trace(fn, specs)
        assert "transform_params" in mod.names()


# expressions and SPECs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("fuse-qvk", "unknown recipe 'fuse-qvk' in 'fuse-qvk' (did you mean 'fuse-qkv'?)"),
        ("fuse-qkv:2", "recipe 'fuse-qkv' takes no argument, got 'fuse-qkv:2'"),
        ("cast:float13", "recipe 'cast': bad argument 'float13' in 'cast:float13': expected one"),
        ("quantize-int4:3", "bad argument '3' in 'quantize-int4:3': expected a positive even"),
        ("quantize-int4:x", "bad argument 'x' in 'quantize-int4:x'"),
        ("fuse-qkv+", "unknown recipe '' in 'fuse-qkv+'"),
    ],
)
def test_bad_recipe_expressions_are_refused(expression: str, message: str) -> None:
    with pytest.raises(ConvertError) as err:
        recipe(expression)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("spelling", "converter"),
    [("f16", "f16"), ("float16", "f16"), ("fp16", "f16"), ("BFloat16", "bf16"), ("fp32", "f32")],
)
def test_gguf_takes_the_dtype_spellings_cast_takes(spelling: str, converter: str) -> None:
    assert output_type(spelling, ["float32"]).name == converter


def test_cast_function_refuses_an_unknown_dtype() -> None:
    with pytest.raises(ConvertError, match=r"recipe 'cast': expected one of .* got 'int8'"):
        trace(lambda p: cast(p, "int8"), {"w": ((2,), "float32")})


def test_load_spec_resolves_callables_files_and_recipes(tmp_path: Path) -> None:
    def fn(params: Any) -> Any:
        return dict(params)

    assert load_spec(fn) is fn
    spec = tmp_path / "spec.py"
    spec.write_text("def transform(params):\n    return {'y': params['x'].T}\n")
    for form in (str(spec), spec):
        mod = trace(load_spec(form), {"x": ((2, 3), "float32")})
        assert mod["transform_params"].attrs["output_names"] == ("y",)
    assert load_spec("cast:bfloat16").__name__ == "cast:bfloat16"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def transform(params:\n", "spec.py:1: syntax error"),
        ("import no_such_module_here\n", "loading the spec failed: ModuleNotFoundError"),
        ("TRANSFORM = 1\n", "expected a function `transform(params)`, found none"),
    ],
)
def test_bad_spec_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    spec = tmp_path / "spec.py"
    spec.write_text(text)
    with pytest.raises(ConvertError) as err:
        load_spec(str(spec))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_spec_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"nope\.py: spec file not found"):
        load_spec(str(tmp_path / "nope.py"))
