"""Every traced operation against the same computation in numpy, bit for bit, eager and lazy.

Where the traced API is numpy's own (methods, operators, numpy functions) the transform itself
runs on the numpy arrays as the oracle; `lazyparams.ops` functions get a numpy oracle each.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.frontend import ops

F32, F16, I32 = np.float32, np.float16, np.int32

SHAPES: dict[str, tuple[tuple[int, ...], Any]] = {
    "a": ((4, 6), F32),
    "b": ((4, 6), F32),
    "c": ((6, 3), F32),
    "v": ((6,), F32),
    "h": ((4, 6), F16),
    "i": ((4, 6), I32),
    "t3": ((2, 3, 4), F32),
    "w": ((4, 64), F32),
}


def make_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {}
    for name, (shape, dtype) in SHAPES.items():
        if np.issubdtype(dtype, np.integer):
            arrays[name] = rng.integers(-50, 50, size=shape).astype(dtype)
        else:
            arrays[name] = (rng.standard_normal(shape) * 3).astype(dtype)
    arrays["a"][0, 0] = 0.0  # -x must keep the sign of zero
    arrays["w"][1] = 0.0  # an all-zero row quantizes with scale 1
    return arrays


# Transforms written once: they run traced and, as their own oracle, on numpy arrays ----------

NUMPY_API = {
    "T": lambda p: {"y": p["a"].T, "z": p["t3"].T},
    "transpose": lambda p: {
        "x": p["t3"].transpose(2, 0, 1),
        "y": p["t3"].transpose((1, 2, 0)),
        "z": p["t3"].transpose(),
        "u": p["t3"].transpose(0, -1, 1),
        "n": np.transpose(p["t3"], (1, 0, 2)),
    },
    "reshape": lambda p: {
        "x": p["a"].reshape(3, 8),
        "y": p["a"].reshape((-1, 2)),
        "z": p["a"].reshape(-1),
        "u": p["t3"].reshape(6, 4).reshape([4, 6]),
        "n": np.reshape(p["a"], (2, 12)),
    },
    "astype": lambda p: {
        "f16": p["a"].astype(np.float16),
        "bf16": p["a"].astype(ml_dtypes.bfloat16),
        "f64": p["a"].astype(np.dtype("float64")),
        "i8": (p["a"] * 10.0).astype(np.int8),
        "f32": p["i"].astype(np.float32),
        "same": p["a"].astype(np.float32),
    },
    "tensor_arithmetic": lambda p: {
        "add": p["a"] + p["b"],
        "sub": p["a"] - p["b"],
        "mul": p["a"] * p["b"],
        "div": p["a"] / p["b"],
        "chain": (p["a"] + p["b"]) * p["a"] - p["b"] / p["a"],
        "int": p["i"] * p["i"] - p["i"],
        "half": p["h"] * p["h"] + p["h"],
    },
    "scalar_arithmetic": lambda p: {
        "add": p["a"] + 1.5,
        "radd": 2 + p["a"],
        "sub": p["a"] - 3,
        "rsub": 1 - p["a"],
        "mul": p["a"] * 0.1,
        "rmul": 3.0 * p["a"],
        "div": p["a"] / 7.0,
        "rdiv": 1.0 / p["a"],
        "neg": -p["a"],
        "pos": +p["a"],
        "half": p["h"] * 0.1 + 1,
        "int": p["i"] * -2 + 7,
        "ineg": -p["i"],
        "np_scalar": p["a"] * np.float32(0.5),
    },
    "broadcasting": lambda p: {
        "row": p["a"] + p["v"],
        "rrow": p["v"] * p["a"],
        "const": p["a"] - np.arange(6, dtype=np.float32),
        "rconst": np.arange(6, dtype=np.float32) * p["a"],
        "column": p["a"] / np.full((4, 1), 3.0, dtype=np.float32),
    },
    "matmul": lambda p: {
        "mm": p["a"] @ p["c"],
        "mv": p["a"] @ p["v"],
        "np": np.matmul(p["a"], p["c"]),
        "const": p["a"] @ np.eye(6, dtype=np.float32),
    },
    "ufuncs": lambda p: {
        "add": np.add(p["a"], p["b"]),
        "sub": np.subtract(p["a"], 1.0),
        "mul": np.multiply(2.0, p["a"]),
        "div": np.divide(p["a"], p["b"]),
        "neg": np.negative(p["a"]),
        "pos": np.positive(p["a"]),
    },
    "numpy_functions": lambda p: {
        "cat": np.concatenate([p["a"], p["b"]], axis=1),
        "stack": np.stack([p["a"], p["b"]], axis=-1),
        "expand": np.expand_dims(p["v"], 0),
        "take": np.take(p["a"], [3, 1], axis=0),
        "split0": np.split(p["a"], 2)[0],
        "split1": np.split(p["a"], 2)[1],
    },
    "iteration": lambda p: {f"row{k}": row * 2.0 for k, row in enumerate(p["a"])},
    "passthrough_and_constants": lambda p: {
        "same": p["a"],
        "again": p["a"],
        "const": np.arange(5, dtype=np.int8),
        "scalar": np.float16(3.5),
        "t": p["a"].T,
    },
}


@pytest.mark.parametrize("name", list(NUMPY_API))
def test_numpy_api_matches_numpy(name: str, check: Any) -> None:
    check(NUMPY_API[name], make_arrays())


# lazyparams.ops, each with a numpy oracle -----------------------------------------------------


def np_quantize_int8(x: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    others = tuple(i for i in range(x.ndim) if i != axis)
    amax = np.abs(x).max(axis=others)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(127)).astype(np.float32)
    shape = [1] * x.ndim
    shape[axis] = -1
    q = np.clip(np.rint(x / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def np_dequantize_int8(q: np.ndarray, scale: np.ndarray, axis: int = 0) -> np.ndarray:
    shape = [1] * q.ndim
    shape[axis] = -1
    return q.astype(np.float32) * scale.reshape(shape)


def np_quantize_int4(x: np.ndarray, group_size: int = 32) -> tuple[np.ndarray, np.ndarray]:
    n, k = x.shape
    groups = x.reshape(n, k // group_size, group_size)
    amax = np.abs(groups).max(axis=2)
    scale = np.where(amax == 0, np.float32(1), amax / np.float32(7)).astype(np.float32)
    q = np.clip(np.rint(groups / scale[:, :, None]), -8, 7).astype(np.int8).reshape(n, k)
    nibbles = (q & 0xF).astype(np.uint8)
    return nibbles[:, 0::2] | (nibbles[:, 1::2] << 4), scale


def np_dequantize_int4(packed: np.ndarray, scale: np.ndarray, group_size: int = 32) -> np.ndarray:
    n = packed.shape[0]
    q = np.empty((n, packed.shape[1] * 2), dtype=np.int8)
    q[:, 0::2] = ((packed & 0xF).astype(np.int8) ^ 8) - 8
    q[:, 1::2] = ((packed >> 4).astype(np.int8) ^ 8) - 8
    return q.astype(np.float32) * np.repeat(scale, group_size, axis=1)


OPS: dict[str, tuple[Any, Any]] = {
    "concat": (
        lambda p: {
            "x": ops.concat([p["a"], p["b"]]),
            "y": ops.concat((p["a"], p["b"], p["a"]), axis=-1),
            "z": ops.concatenate([p["a"], np.ones((1, 6), np.float32)]),
            "one": ops.concat([p["a"]]),
        },
        lambda n: {
            "x": np.concatenate([n["a"], n["b"]]),
            "y": np.concatenate((n["a"], n["b"], n["a"]), axis=-1),
            "z": np.concatenate([n["a"], np.ones((1, 6), np.float32)]),
            "one": n["a"],
        },
    ),
    "stack": (
        lambda p: {
            "x": ops.stack([p["a"], p["b"]]),
            "y": ops.stack([p["a"], p["b"]], axis=1),
            "z": ops.stack([p["v"], p["v"], p["v"]], axis=-1),
        },
        lambda n: {
            "x": np.stack([n["a"], n["b"]]),
            "y": np.stack([n["a"], n["b"]], axis=1),
            "z": np.stack([n["v"], n["v"], n["v"]], axis=-1),
        },
    ),
    "split": (
        lambda p: dict(
            zip(
                ["s0", "s1", "i0", "i1", "i2", "c0", "c1", "c2"],
                ops.split(p["a"], 2) + ops.split(p["a"], [1, -1]) + ops.split(p["a"], 3, axis=1),
                strict=True,
            )
        ),
        lambda n: dict(
            zip(
                ["s0", "s1", "i0", "i1", "i2", "c0", "c1", "c2"],
                np.split(n["a"], 2) + np.split(n["a"], [1, -1]) + np.split(n["a"], 3, axis=1),
                strict=True,
            )
        ),
    ),
    "take": (
        lambda p: {
            "x": ops.take(p["a"], [2, 0, 2], axis=1),
            "y": ops.take(p["a"], [5, 0, -1]),
            "z": ops.take(p["t3"], np.array([[1, 0], [0, 1]]), axis=-1),
        },
        lambda n: {
            "x": np.take(n["a"], [2, 0, 2], axis=1),
            "y": np.take(n["a"], [5, 0, -1]),
            "z": np.take(n["t3"], np.array([[1, 0], [0, 1]]), axis=-1),
        },
    ),
    "layout": (
        lambda p: {
            "t": ops.transpose(p["t3"], (2, 1, 0)),
            "p": ops.permute_dims(p["a"]),
            "r": ops.reshape(p["t3"], (4, -1)),
            "e": ops.expand_dims(p["v"], (0, 2)),
            "e1": ops.expand_dims(p["a"], -1),
            "s": ops.squeeze(ops.reshape(p["v"], (1, 6, 1))),
            "s1": ops.squeeze(ops.reshape(p["v"], (1, 6, 1)), axis=0),
        },
        lambda n: {
            "t": np.transpose(n["t3"], (2, 1, 0)),
            "p": np.transpose(n["a"]),
            "r": np.reshape(n["t3"], (4, -1)),
            "e": np.expand_dims(n["v"], (0, 2)),
            "e1": np.expand_dims(n["a"], -1),
            "s": np.squeeze(n["v"].reshape(1, 6, 1)),
            "s1": np.squeeze(n["v"].reshape(1, 6, 1), axis=0),
        },
    ),
    "dtype_and_arithmetic": (
        lambda p: {
            "cast": ops.cast(p["a"], "float16"),
            "astype": ops.astype(p["i"], np.float64),
            "add": ops.add(p["a"], p["b"]),
            "sub": ops.subtract(p["a"], 2.0),
            "mul": ops.multiply(p["h"], p["h"]),
            "div": ops.divide(p["a"], p["b"]),
            "neg": ops.negative(p["i"]),
            "mm": ops.matmul(p["a"], p["c"]),
            "mm32": ops.matmul(p["h"], p["h"].T, out_dtype="float32"),
            "mm16": ops.matmul(p["a"], p["c"], out_dtype=np.float16),
        },
        lambda n: {
            "cast": n["a"].astype("float16"),
            "astype": n["i"].astype(np.float64),
            "add": np.add(n["a"], n["b"]),
            "sub": np.subtract(n["a"], 2.0),
            "mul": np.multiply(n["h"], n["h"]),
            "div": np.divide(n["a"], n["b"]),
            "neg": np.negative(n["i"]),
            "mm": np.matmul(n["a"], n["c"]),
            "mm32": np.matmul(n["h"], n["h"].T, dtype=np.float32),
            "mm16": np.matmul(n["a"], n["c"], dtype=np.float16),
        },
    ),
    "creation": (
        lambda p: {
            "z": ops.zeros((2, 3), "float32"),
            "o": ops.ones(3, np.int8),
            "d": ops.zeros((2,)),
            "zl": ops.zeros_like(p["a"]),
            "ol": ops.ones_like(p["i"], dtype=np.float16),
            "c": ops.constant(np.arange(6, dtype=np.float32)) * p["a"],
            "l": ops.constant([[1, 2], [3, 4]], dtype="int16"),
        },
        lambda n: {
            "z": np.zeros((2, 3), "float32"),
            "o": np.ones(3, np.int8),
            "d": np.zeros((2,)),
            "zl": np.zeros_like(n["a"]),
            "ol": np.ones_like(n["i"], dtype=np.float16),
            "c": np.arange(6, dtype=np.float32) * n["a"],
            "l": np.array([[1, 2], [3, 4]], dtype=np.int16),
        },
    ),
    "quantize_int8": (
        lambda p: dict(
            zip(
                ["q0", "s0", "q1", "s1"],
                ops.quantize_int8(p["a"]) + ops.quantize_int8(p["t3"], axis=-1),
                strict=True,
            )
        ),
        lambda n: dict(
            zip(
                ["q0", "s0", "q1", "s1"],
                np_quantize_int8(n["a"]) + np_quantize_int8(n["t3"], axis=2),
                strict=True,
            )
        ),
    ),
    "dequantize_int8": (
        lambda p: {"x": ops.dequantize_int8(*ops.quantize_int8(p["w"], axis=1), axis=1)},
        lambda n: {"x": np_dequantize_int8(*np_quantize_int8(n["w"], axis=1), axis=1)},
    ),
    "quantize_int4": (
        lambda p: dict(
            zip(
                ["p32", "s32", "p16", "s16"],
                ops.quantize_int4(p["w"]) + ops.quantize_int4(p["w"], group_size=16),
                strict=True,
            )
        ),
        lambda n: dict(
            zip(
                ["p32", "s32", "p16", "s16"],
                np_quantize_int4(n["w"]) + np_quantize_int4(n["w"], group_size=16),
                strict=True,
            )
        ),
    ),
    "dequantize_int4": (
        lambda p: {"x": ops.dequantize_int4(*ops.quantize_int4(p["w"], 16), group_size=16)},
        lambda n: {"x": np_dequantize_int4(*np_quantize_int4(n["w"], 16), group_size=16)},
    ),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_match_numpy(name: str, check: Any) -> None:
    traced, oracle = OPS[name]
    check(traced, make_arrays(), oracle)


def test_numpy_quantization_oracles_follow_the_conventions() -> None:
    """The oracles themselves: int4 packs low nibble first, and both formats round-trip."""
    x = np.array([[7.0, -7.0, 3.5, 0.0]], dtype=np.float32)
    packed, scale = np_quantize_int4(x, group_size=4)
    assert scale.tolist() == [[1.0]]
    assert packed.tolist() == [[0x97, 0x04]]  # 7 | (-7 -> 0x9) << 4 ; 4 (3.5 rounds to even) | 0
    assert np_dequantize_int4(packed, scale, 4).tolist() == [[7.0, -7.0, 4.0, 0.0]]
    q, s = np_quantize_int8(np.array([[0.0, 0.0], [1.27, -2.54]], dtype=np.float32))
    assert q.tolist() == [[0, 0], [64, -127]] and s[0] == 1.0


# A whole transform: the llama-like workload, written with numpy's own functions -------------


def llama_like(p: Any) -> dict[str, Any]:
    """Fuse q/k/v and gate/up, transpose every linear weight, cast to float16."""
    out = {}
    for layer in range(2):

        def w(name: str, layer: int = layer) -> Any:
            return p[f"model.layers.{layer}.{name}.weight"]

        fused = {
            "qkv": np.concatenate([w("q"), w("k"), w("v")]),
            "o": w("o"),
            "gate_up": np.concatenate([w("gate"), w("up")]),
            "down": w("down"),
        }
        for name, weight in fused.items():
            out[f"layers.{layer}.{name}"] = weight.T.astype(np.float16)
    return out


def test_llama_like_transform_matches_numpy(check: Any) -> None:
    d, f = 8, 12
    shapes = {
        "q": (d, d),
        "k": (d, d),
        "v": (d, d),
        "o": (d, d),
        "gate": (f, d),
        "up": (f, d),
        "down": (d, f),
    }
    rng = np.random.default_rng(1)
    arrays = {
        f"model.layers.{layer}.{name}.weight": rng.standard_normal(shape).astype(np.float32)
        for layer in range(2)
        for name, shape in shapes.items()
    }
    mod = check(llama_like, arrays)
    assert mod["transform_params"].ret_struct_info.fields[0].shape[0].value == d
