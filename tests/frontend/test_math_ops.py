"""The traced math (elementwise functions, comparisons, masks, where, reductions) against
numpy, bit for bit, eager and lazy; and its errors at the user's line."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from lazyparams.frontend import ops

BF16 = ml_dtypes.bfloat16


def make_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    a[0, :3] = [0.0, -0.0, np.nan]
    return {
        "a": a,
        "b": (rng.standard_normal((4, 6)) * 3).astype(np.float32),
        "v": rng.standard_normal(6).astype(np.float32),
        "h": rng.standard_normal((4, 6)).astype(np.float16),
        "bf": rng.standard_normal((3, 5)).astype(BF16),
        "i": rng.integers(-100, 100, (4, 6)).astype(np.int8),
        "u": rng.integers(0, 60000, (2, 3)).astype(np.uint16),
    }


# Transforms in numpy's own API: they run traced and, as their own oracle, on numpy arrays

NUMPY_API = {
    "unary_ufuncs": lambda p: {
        "abs": np.abs(p["a"]),
        "babs": abs(p["h"]),
        "sign": np.sign(p["a"]),
        "sqrt": np.sqrt(p["a"]),
        "sin": np.sin(p["bf"]),
        "cos": np.cos(p["h"]),
        "arccos": np.arccos(p["v"]),
        "exp": np.exp(p["bf"]),
        "log": np.log(np.absolute(p["a"])),
        "square": np.square(p["h"]),
    },
    "extremes": lambda p: {
        "max": np.maximum(p["a"], p["b"]),
        "min": np.minimum(p["a"], 0.0),
        "row": np.maximum(p["v"], p["a"]),
        "int": np.minimum(p["i"], 7),
        "const": np.maximum(p["a"], np.linspace(-1, 1, 6, dtype=np.float32)),
    },
    "comparisons": lambda p: {
        "lt": p["a"] < p["b"],
        "le": p["a"] <= 0.5,
        "gt": 0.5 > p["a"],  # noqa: SIM300  (the reflected comparison is the point)
        "ge": p["v"] >= p["a"],
        "np_gt": np.greater(p["a"], p["b"]),
        "np_ge": np.greater_equal(p["i"], 3),
        "np_lt": np.less(p["bf"], p["bf"] * 2.0),
        "np_le": np.less_equal(p["h"], p["h"]),
        "eq": np.equal(p["a"], p["a"]),
        "ne": np.not_equal(p["i"], 0),
        "mask_and": (p["a"] > 0) & (p["b"] > 0),
        "mask_or": (p["a"] > 0) | np.less(p["b"], 0),
        "np_and": np.logical_and(p["a"] > 0, True),
        "np_or": np.logical_or(p["a"] > 0, p["b"] > p["a"]),
    },
    "where": lambda p: {
        "both": np.where(p["a"] > p["b"], p["a"], p["b"]),
        "scalar": np.where(p["a"] > 0, p["a"], 0.0),
        "rscalar": np.where(p["i"] > 0, 1, p["i"]),
        "broadcast": np.where(p["v"] > 0, p["a"], p["v"]),
        "half": np.where(p["h"] > 0, p["h"], -p["h"]),
    },
    "reductions": lambda p: {
        "sum": p["a"].sum(),
        "sum0": np.sum(p["b"], axis=0),
        "sum_keep": p["b"].sum(axis=(-1, 0), keepdims=True),
        "sum_half": np.sum(p["h"], axis=1),
        "sum_int": p["i"].sum(1),
        "sum_uint": np.sum(p["u"]),
        "sum_mask": np.sum(p["a"] > 0, axis=0),
        "sum_f32": np.sum(p["bf"], axis=0, dtype=np.float32),
        "max": p["b"].max(),
        "max1": np.max(p["bf"], axis=1),
        "amax": np.amax(p["i"], axis=(0, 1), keepdims=True),
        "min": p["b"].min(axis=0),
        "amin": np.amin(p["h"]),
        "mean": p["b"].mean(),
        "mean1": np.mean(p["b"], axis=-1, keepdims=True),
        "mean_int": np.mean(p["i"], axis=0),
        "mean_f32": p["h"].mean(axis=0, dtype=np.float32),
    },
}


@pytest.mark.parametrize("name", list(NUMPY_API))
def test_numpy_api_matches_numpy(name: str, check: Any) -> None:
    check(NUMPY_API[name], make_arrays())


# lazyparams.ops with a numpy oracle each

OPS = {
    "unary": (
        lambda p: {"acos": ops.acos(p["v"]), "arccos": ops.arccos(p["a"]), "abs": ops.abs(p["bf"])},
        lambda p: {"acos": np.arccos(p["v"]), "arccos": np.arccos(p["a"]), "abs": np.abs(p["bf"])},
    ),
    "float16_mean_in_float16": (
        lambda p: {"m": ops.mean(p["h"], axis=1), "s": ops.sum(p["h"], 0, keepdims=True)},
        lambda p: {
            "m": np.mean(p["h"], axis=1, dtype=np.float16),
            "s": np.sum(p["h"], 0, keepdims=True),
        },
    ),
    "masks": (
        lambda p: {
            "w": ops.where(ops.logical_and(ops.greater(p["a"], 0), p["b"] < 1), p["a"], -1.0),
            "eq": ops.equal(p["i"], ops.maximum(p["i"], 0)),
        },
        lambda p: {
            "w": np.where((p["a"] > 0) & (p["b"] < 1), p["a"], np.float32(-1)),
            "eq": p["i"] == np.maximum(p["i"], 0),
        },
    ),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_match_numpy(name: str, check: Any) -> None:
    fn, oracle = OPS[name]
    check(fn, make_arrays(), oracle)


def test_ties_merging_matches_numpy(check: Any) -> None:
    """A model-merging step (TIES): trim each task vector to its larger entries, elect the sign
    of the summed mass, average the entries that agree with it."""

    def merge(p: Any) -> dict[str, Any]:
        deltas = [p["a"] - p["v"], p["b"] - p["v"]]
        trimmed = [np.where(np.abs(d) >= 1.0, d, 0.0) for d in deltas]
        sign = np.sign(np.sum(np.stack(trimmed), axis=0))
        kept = [np.where(np.sign(t) * sign > 0, t, 0.0) for t in trimmed]
        counts = np.sum(np.stack([np.where(np.not_equal(k, 0), 1.0, 0.0) for k in kept]), axis=0)
        count = np.maximum(counts.astype(np.float32), 1.0)
        return {"merged": p["v"] + np.sum(np.stack(kept), axis=0) / count, "count": counts}

    arrays = make_arrays()
    arrays["a"][0, 2] = 1.5  # no NaN in a merge
    check(merge, arrays)


def test_the_mean_of_ints_is_a_float64_mean_as_in_numpy() -> None:
    def fn(p: Any) -> dict[str, Any]:
        return {"x": p["ints"].mean(), "y": p["ints"].sum(0), "z": np.sum(p["half"])}

    from lazyparams.frontend import trace
    from tests.frontend.test_errors import INPUTS

    func = trace(fn, INPUTS)["transform_params"]
    dtypes = [f.dtype for f in func.ret_struct_info.fields]  # type: ignore[union-attr]
    assert dtypes == ["float64", "int64", "float16"]
