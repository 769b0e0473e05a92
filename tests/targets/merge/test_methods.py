"""Every merge method against a numpy reference written from its published definition
(mergekit's documentation and the methods' papers), on the tiny models of conftest.py: bitwise
where numpy computes in the same float order. Also how parameters resolve (filters, gradients,
scopes, defaults, dtypes) and every bad value refused in one line naming file and line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import load_file

import lazyparams
from lazyparams.errors import LazyParamsError

F32, F64, BF16 = np.float32, np.float64, ml_dtypes.bfloat16
Tensors = dict[str, np.ndarray]
MODELS = "models:\n  - model: a\n    parameters: {a}\n  - model: b\n    parameters: {b}\n"


def merged(path: Path, dst: Path, spec: str = "merged", **options: Any) -> Tensors:
    lazyparams.convert(spec, path, dst, progress=False, **options)
    return load_file(str(dst / "model.safetensors"))


def two(method: str, a: str, b: str, rest: str = "", base: bool = True) -> str:
    """A configuration of `method` over models a and b (their parameters as flow mappings)."""
    head = f"merge_method: {method}\n" + ("base_model: base\n" if base else "")
    return head + MODELS.format(a=a, b=b) + rest


def check(out: Tensors, models: dict[str, Tensors], reference: Callable[..., np.ndarray]) -> None:
    """Each output tensor equals reference(name, base, a, b) bit for bit."""
    base, a, b = (models[n] for n in ("base", "a", "b"))
    assert sorted(out) == sorted(base)
    for name in base:
        want = reference(name, base[name], a[name], b[name])
        assert out[name].dtype == want.dtype, name
        np.testing.assert_array_equal(out[name], want, err_msg=name)


def total(x: np.ndarray) -> Any:
    """A whole-tensor sum rows first, as the merge steps add (float32 for bfloat16)."""
    x = x.astype(F32) if x.dtype == BF16 else x
    return (x.sum(axis=tuple(range(1, x.ndim))) if x.ndim >= 2 else x).sum()


def norm(x: np.ndarray) -> Any:
    return np.sqrt(total(x * x))


def trig(fn: Callable[[Any], Any], x: Any) -> Any:
    """sin/arccos rounded once to float32 (from float64)."""
    return F32(fn(F64(x)))


# Linear and the task-vector family ---------------------------------------------------------


def fused(terms: Sequence[tuple[np.ndarray, float]]) -> np.ndarray:
    """sum_i x_i * w_i in float32, each product added with one rounding (a fused add)."""
    acc = np.zeros_like(terms[0][0], dtype=F32)
    for x, w in terms:
        acc = (acc.astype(F64) + x.astype(F64) * F64(F32(w))).astype(F32)
    return acc


def test_linear_averages_with_fused_products(models, config, tmp_path):
    out = merged(
        config(two("linear", "{weight: 0.7}", "{weight: 0.2}", base=False)), tmp_path / "o"
    )
    weights = F32(F32(0.7) + F32(0.2))
    check(out, models, lambda n, base, a, b: fused([(a, 0.7), (b, 0.2)]) / weights)


def test_linear_merges_the_base_as_one_more_input(models, config, tmp_path):
    text = two("linear", "{weight: 0.5}", "{weight: 0.25}", "parameters: {weight: 0.125}\n")
    out = merged(config(text + "dtype: bfloat16\n"), tmp_path / "o")
    total_weight = F32(F32(F32(0.5) + F32(0.25)) + F32(0.125))

    def want(n: str, base: Any, a: Any, b: Any) -> np.ndarray:
        x = [t.astype(BF16).astype(F32) for t in (a, b, base)]
        return (fused(list(zip(x, (0.5, 0.25, 0.125), strict=True))) / total_weight).astype(BF16)

    check(out, models, want)


def task_vectors(
    base: np.ndarray,
    deltas: Sequence[np.ndarray],
    weights: Sequence[float],
    elect: bool = False,
    normalize: bool = False,
    scale: float = 1.0,
) -> np.ndarray:
    """base + scale * sum_i w_i d_i (by sign election: only where sign(w_i d_i) agrees with the
    sum's, 0 counting as +), divided by the weights that counted when `normalize`."""
    weighted = [d * F32(w) for d, w in zip(deltas, weights, strict=True)]
    mixed = np.sum(weighted, axis=0, dtype=F32)
    divisor: Any = F32(sum(F32(w) for w in weights)) or F32(1)
    if elect:
        positive = mixed >= 0
        masks = [np.where(positive, d > 0, d < 0).astype(F32) for d in weighted]
        mixed = np.sum([d * m for d, m in zip(weighted, masks, strict=True)], axis=0)
        divisor = np.sum([m * F32(w) for m, w in zip(masks, weights, strict=True)], axis=0)
        divisor = np.where(divisor == 0, F32(1), divisor)
    if normalize:
        mixed = mixed / divisor
    return base + (mixed * F32(scale) if scale != 1 else mixed)


def test_task_arithmetic(models, config, tmp_path):
    rest = "parameters: {lambda: 0.9, normalize: true}\ndtype: float32\n"
    out = merged(
        config(two("task_arithmetic", "{weight: 0.6}", "{weight: 0.3}", rest)), tmp_path / "o"
    )
    check(
        out,
        models,
        lambda n, s, a, b: task_vectors(s, [a - s, b - s], [0.6, 0.3], False, True, 0.9),
    )


def largest(delta: np.ndarray, density: float) -> np.ndarray:
    """TIES' trim: the density share of largest magnitudes (at least one element) kept."""
    keep = max(1, int(density * delta.size))
    mask = np.zeros(delta.size, F32)
    mask[np.argsort(-np.abs(delta).reshape(-1), kind="stable")[:keep]] = 1
    return delta * mask.reshape(delta.shape)


def test_ties_trims_elects_and_averages(models, config, tmp_path):
    text = two("ties", "{weight: 0.7, density: 0.5}", "{weight: -0.4, density: 0.8}")
    out = merged(config(text), tmp_path / "o")

    def want(n: str, base: Any, a: Any, b: Any) -> np.ndarray:
        deltas = [largest(a - base, 0.5), largest(b - base, 0.8)]
        return task_vectors(base, deltas, [0.7, -0.4], elect=True, normalize=True)

    check(out, models, want)


def without_outliers(delta: np.ndarray, density: float, gamma: float) -> np.ndarray:
    """Breadcrumbs: drop the gamma share of largest magnitudes, keep the density share."""
    n = delta.size
    kept, top = int(density * n), int(gamma * n)
    bottom = max(0, n - kept - top)
    mask = np.zeros(n, F32)
    mask[np.argsort(np.abs(delta).reshape(-1), kind="stable")[bottom : bottom + kept]] = 1
    return delta * mask.reshape(delta.shape)


@pytest.mark.parametrize("method", ["breadcrumbs", "breadcrumbs_ties"])
def test_breadcrumbs_drop_outliers_and_small_magnitudes(method, models, config, tmp_path):
    text = two(method, "{weight: 0.6, density: 0.5, gamma: 0.1}", "{weight: 0.4, density: 0.75}")
    out = merged(config(text), tmp_path / "o")

    def want(n: str, base: Any, a: Any, b: Any) -> np.ndarray:
        deltas = [without_outliers(a - base, 0.5, 0.1), without_outliers(b - base, 0.75, 0.01)]
        return task_vectors(base, deltas, [0.6, 0.4], elect=method.endswith("ties"))

    check(out, models, want)


class Stream:
    """torch's CPU generator after manual_seed: MT19937 as numpy's legacy RandomState seeds it,
    each draw's low 24 bits a float32 uniform."""

    def __init__(self, seed: int) -> None:
        self.state = np.random.RandomState(seed)

    def uniform(self, shape: tuple[int, ...]) -> np.ndarray:
        raw = self.state.randint(0, 2**32, size=int(np.prod(shape)), dtype=np.uint64)
        return ((raw & 0xFFFFFF).astype(F64) * 2.0**-24).astype(F32).reshape(shape)


def rescaled(delta: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The masked vector times its L1 norm's loss (unscaled where a norm is below 1e-7)."""
    masked = delta * mask
    before, after = total(np.abs(delta)), total(np.abs(masked))
    return masked if before < 1e-7 or after < 1e-7 else masked * (before / after)


def random_merge(models: dict[str, Tensors], thin: Callable[..., np.ndarray], **kw: Any) -> Tensors:
    """Each tensor in name order (mergekit's), each model's vector thinned with the stream."""
    stream, base = Stream(kw.pop("seed")), models["base"]
    done = {}
    for name in sorted(base):
        deltas = [thin(models[m][name] - base[name], i, stream) for i, m in enumerate("ab")]
        done[name] = task_vectors(base[name], deltas, kw["weights"], kw["elect"], kw["normalize"])
    return done


@pytest.mark.parametrize("method", ["dare_linear", "dare_ties"])
def test_dare_drops_at_random_in_mergekits_order(method, models, config, tmp_path):
    text = two(method, "{weight: 0.6, density: 0.7}", "{weight: 0.4, density: 0.5}")
    out = merged(config(text), tmp_path / "o", spec="merged:42")
    density = (0.7, 0.5)

    def thin(delta: np.ndarray, i: int, stream: Stream) -> np.ndarray:
        mask = (stream.uniform(delta.shape) < F32(density[i])).astype(F32)
        return rescaled(delta, mask)

    want = random_merge(
        models, thin, seed=42, weights=[0.6, 0.4], elect=method == "dare_ties", normalize=False
    )
    check(out, models, lambda n, *_: want[n])


@pytest.mark.parametrize("method", ["della", "della_linear"])
def test_della_keeps_by_magnitude_rank(method, models, config, tmp_path):
    text = two(method, "{weight: 0.6, density: 0.6, epsilon: 0.2}", "{weight: 0.4, density: 0.5}")
    out = merged(config(text), tmp_path / "o", spec="merged:7")
    settings = ((0.6, 0.2), (0.5, 0.15))

    def thin(delta: np.ndarray, i: int, stream: Stream) -> np.ndarray:
        density, epsilon = settings[i]
        rows = delta.reshape(1, -1) if delta.ndim == 1 else delta
        ranks = np.argsort(np.argsort(np.abs(rows), axis=1), axis=1).astype(F32) + 1
        low, high = ranks.min(axis=1, keepdims=True), ranks.max(axis=1, keepdims=True)
        spread = np.clip((ranks - low) / (high - low), 0, 1)
        keep = spread * F32(2) * F32(epsilon) + F32(density - epsilon)
        mask = (stream.uniform(rows.shape) < keep).astype(F32)
        return rescaled(rows, mask).reshape(delta.shape)

    elect = method == "della"
    want = random_merge(models, thin, seed=7, weights=[0.6, 0.4], elect=elect, normalize=elect)
    check(out, models, lambda n, *_: want[n])


# The interpolations ------------------------------------------------------------------------


def slerp(t: float, v0: np.ndarray, v1: np.ndarray) -> np.ndarray:
    """Spherical interpolation of two whole tensors (a line where nearly parallel), float32."""
    a, b, t32 = v0.astype(F32), v1.astype(F32), F32(t)
    na, nb = norm(a), norm(b)
    cos = np.clip(total((a / (na if na > 1e-8 else 1)) * (b / (nb if nb > 1e-8 else 1))), -1, 1)
    if abs(cos) > 0.9995:
        return a * (F32(1) - t32) + b * t32
    theta = trig(np.arccos, cos)
    sin = trig(np.sin, theta)
    rest = F32(1) - t32
    return a * (trig(np.sin, theta * rest) / sin) + b * (trig(np.sin, theta * t32) / sin)


def test_slerp_with_filters_and_a_gradient(models, config, tmp_path):
    text = (
        "merge_method: slerp\nbase_model: base\nmodels:\n  - model: base\n  - model: a\n"
        "parameters:\n  t:\n    - filter: self_attn\n      value: [0, 0.5, 1]\n"
        "    - filter: '*'\n      value: 0.3\ndtype: float32\nout_dtype: bfloat16\n"
    )
    out = merged(config(text), tmp_path / "o")

    def want(name: str, base: Any, a: Any, b: Any) -> np.ndarray:
        layer = int(name.split(".")[2]) if ".layers." in name else None
        t = layer / 2 if "self_attn" in name and layer is not None else 0.3
        return slerp(t, base, a).astype(BF16)

    check(out, models, want)


def nuslerp(t: float, v0: np.ndarray, v1: np.ndarray, axis: int | None) -> np.ndarray:
    """NuSLERP of two tensors, whole (`axis` None) or along `axis`, in their dtype (float32)."""

    def length(x: np.ndarray) -> Any:
        return norm(x) if axis is None else np.sqrt((x * x).sum(axis=axis, keepdims=True))

    u0, u1 = v0 / np.maximum(length(v0), F32(1e-7)), v1 / np.maximum(length(v1), F32(1e-7))
    product = u0 * u1
    cos = np.clip(total(product) if axis is None else product.sum(axis=axis, keepdims=True), -1, 1)
    parallel = (1 - cos * cos) <= F32(1e-16)
    theta = np.where(parallel, F32(0), np.arccos(np.float64(cos)).astype(F32))
    sin = np.sin(theta.astype(F64)).astype(F32)
    arc = np.sin((theta * F32(1 - t)).astype(F64)).astype(F32) * v0
    arc = arc + np.sin((theta * F32(t)).astype(F64)).astype(F32) * v1
    return np.where(parallel, v0 * F32(1 - t) + v1 * F32(t), arc / sin)


@pytest.mark.parametrize(
    ("options", "axis"),
    [
        ("{}", None),
        ("{nuslerp_flatten: false}", -1),
        ("{nuslerp_flatten: no, nuslerp_row_wise: yes}", 0),
    ],
)
def test_nuslerp_of_task_vectors(options, axis, models, config, tmp_path):
    text = two("nuslerp", "{weight: 0.6}", "{weight: 0.4}", f"parameters: {options}\n")
    out = merged(config(text), tmp_path / "o")
    t = 0.4 / (0.6 + 0.4)
    check(
        out,
        models,
        lambda n, s, a, b: (
            s + nuslerp(t, a - s, b - s, None if s.ndim == 1 and axis is None else axis)
        ),
    )


def test_nuslerp_without_a_base(models, config, tmp_path):
    out = merged(config(two("nuslerp", "{weight: 1}", "{weight: 3}", base=False)), tmp_path / "o")
    check(out, models, lambda n, s, a, b: nuslerp(0.75, a, b, None))


def model_stock(w0: np.ndarray, ws: Sequence[np.ndarray], rows: bool) -> np.ndarray:
    """Model Stock: t = k cos / (1 + (k - 1) cos) toward the models' average, float32."""
    shape = w0.shape
    if rows and w0.ndim == 1:
        w0, ws = w0.reshape(1, -1), [w.reshape(1, -1) for w in ws]

    def reduce(x: np.ndarray) -> Any:
        return x.sum(axis=-1, keepdims=True) if rows else total(x)

    offsets = [w - w0 for w in ws]
    cosines = []
    for i, oa in enumerate(offsets):
        for ob in offsets[i + 1 :]:
            lengths = np.maximum(np.sqrt(reduce(oa * oa)) * np.sqrt(reduce(ob * ob)), F32(1e-6))
            cosines.append(np.clip(reduce(oa * ob) / lengths, -1, 1))
    cos = np.sum(cosines, axis=0, dtype=F32) / F32(len(cosines))
    k = len(ws)
    denominator = cos * F32(k - 1) + F32(1)
    singular = np.abs(denominator) < 1e-6
    t = np.where(singular, F32(0), cos * F32(k) / np.where(singular, F32(1), denominator))
    average = sum(ws[1:], ws[0] + F32(0)) / F32(k)
    return (t * average + (F32(1) - t) * w0).reshape(shape)


@pytest.mark.parametrize("rows", [False, True])
def test_model_stock(rows, models, model_c, config, tmp_path):
    text = (
        "merge_method: model_stock\nbase_model: base\nmodels:\n  - model: a\n  - model: b\n"
        f"  - model: c\nparameters: {{filter_wise: {str(rows).lower()}}}\n"
    )
    out = merged(config(text), tmp_path / "o")
    check(out, models, lambda n, s, a, b: model_stock(s, [a, b, model_c[n]], rows))


def test_passthrough_scales_one_model(models16, config, tmp_path):
    text = "merge_method: passthrough\nmodels:\n  - model: b\n    parameters: {scale: 0.3}\n"
    out = merged(config(text + "dtype: float16\n"), tmp_path / "o")
    scaled = {
        n: (x.astype(np.float16).astype(F32) * F32(0.3)).astype(np.float16)
        for n, x in models16["b"].items()
    }
    check(out, models16, lambda n, *_: scaled[n])


# How parameters resolve ----------------------------------------------------------------------

SLICED = """merge_method: task_arithmetic
base_model: base
slices:
  - sources:
      - model: base
        layer_range: [0, 1]
      - model: a
        layer_range: [1, 2]
        parameters:
          weight:
            - filter: mlp
              value: [0.2, 0.8]
  - sources:
      - model: base
        layer_range: [0, 2]
      - model: a
        layer_range: [1, 3]
    parameters:
      weight: [1e-1, 0.5]
parameters:
  weight: 0.3
dtype: float32
"""


def test_slices_resolve_parameters_by_slice_scope_and_position(models, config, tmp_path):
    """A slice of one layer sits at position 1, each slice's layers spread over [0, 1], the
    tensors outside the layers at 0, from the first slice (embeddings) or the last (norm, head);
    a rule that matches nothing leaves the value to the next scope; `1e-1` (text in YAML) is a
    number."""
    out = merged(config(SLICED), tmp_path / "o")
    base, a = models["base"], models["a"]
    q, up = "model.layers.{}.self_attn.q_proj.weight", "model.layers.{}.mlp.up_proj.weight"
    expected = {  # output name: (base layer, a's layer, a's weight)
        q.format(0): (0, 1, 0.3),
        up.format(0): (0, 1, 0.8),
        q.format(1): (0, 1, 0.1),
        up.format(2): (1, 2, 0.5),
    }
    for name, (own, theirs, weight) in expected.items():
        s, x = base[name.replace(name.split(".")[2], str(own), 1)], a[theirs_name(name, theirs)]
        np.testing.assert_array_equal(out[name], s + (x - s) * F32(weight), err_msg=name)
    for name, weight in (("model.embed_tokens.weight", 0.3), ("lm_head.weight", 0.1)):
        s, x = base[name], a[name]
        np.testing.assert_array_equal(out[name], s + (x - s) * F32(weight), err_msg=name)
    assert len([n for n in out if n.endswith("q_proj.weight")]) == 3


def theirs_name(name: str, layer: int) -> str:
    parts = name.split(".")
    parts[2] = str(layer)
    return ".".join(parts)


def test_flags_in_a_gradient_are_picked_not_interpolated(models, config, tmp_path):
    text = two("task_arithmetic", "{weight: 0.5}", "{weight: 0.25}", "parameters:\n")
    out = merged(config(text + "  normalize: [false, true]\ndtype: float32\n"), tmp_path / "o")

    def want(name: str, base: Any, a: Any, b: Any) -> np.ndarray:
        last = name.startswith("model.layers.2.")  # position 1 of three layers: true
        return task_vectors(base, [a - base, b - base], [0.5, 0.25], normalize=last)

    check(out, models, want)


def test_without_dtype_the_inputs_promote_and_the_output_keeps_it(models, config, tmp_path):
    from tests.targets.merge.conftest import model_tensors, write_model

    half = model_tensors(9, "bfloat16")
    write_model(tmp_path / "h", half)
    text = "merge_method: task_arithmetic\nbase_model: base\nmodels:\n  - model: a\n"
    text += "    parameters: {weight: 0.5}\n  - model: h\n    parameters: {weight: 0.5}\n"
    out = merged(config(text), tmp_path / "o")
    for name, s in models["base"].items():
        x, h = models["a"][name], half[name].astype(F32)
        assert out[name].dtype == F32
        np.testing.assert_array_equal(out[name], task_vectors(s, [x - s, h - s], [0.5, 0.5]))


def test_bfloat16_models_merge_in_bfloat16_without_dtype(models16, config, tmp_path):
    out = merged(config(two("task_arithmetic", "{weight: 0.6}", "{weight: 0.4}")), tmp_path / "o")
    for name, s in models16["base"].items():
        a, b = models16["a"][name], models16["b"][name]
        mixed = (((a - s) * BF16(0.6)).astype(F32) + ((b - s) * BF16(0.4)).astype(F32)).astype(BF16)
        assert out[name].dtype == BF16
        np.testing.assert_array_equal(out[name], s + mixed)


# Bad values ----------------------------------------------------------------------------------

BAD = [
    (
        two("ties", "{weight: abc}", "{weight: 1}"),
        r"line 5: parameter 'weight' = 'abc': expected a number",
    ),
    (two("ties", "{weight: .nan}", "{weight: 1}"), r"line 5: .* expected a finite number"),
    (
        two("ties", "{weight: 1}", "{weight: 1}", "parameters: {normalize: 2}\n"),
        r"line 8: parameter 'normalize' = 2: expected true or false",
    ),
    (
        two("ties", "{weight: 1, density: [0.5, x]}", "{weight: 1}"),
        r"line 5: parameter 'density' = 'x': expected a number",
    ),
    (
        two("ties", "{weight: 1}", "{weight: [{filter: mlp, val: 1}]}"),
        r"line 7: rule \{'filter': 'mlp', 'val': 1\}: expected \{filter: TEXT, value: V\}",
    ),
    (
        two("ties", "{weight: [{value: [{value: 1}]}]}", "{weight: 1}"),
        r"line 5: rule .*: expected a value or a gradient, got rules",
    ),
    (
        two("ties", "{weight: [1, {value: 2}]}", "{weight: 1}"),
        r"line 5: .*expected a value, a gradient of values or a list of \{filter, value\} rules",
    ),
    (
        two("ties", "{weight: 1}", "{weight: 1, gamma: 0.1}"),
        r"line 7: ties takes no parameter 'gamma'; expected one of: int8_mask, normalize, rescale, lambda, weight, density",
    ),
    (
        two("ties", "{weight: 1, lambda: 2}", "{weight: 1}"),
        r"line 5: ties's 'lambda' is one value for the whole merge; expected it under the top-level \(or a slice's\) parameters",
    ),
    (two("ties", "{density: 0.5}", "{weight: 1}"), r"ties needs parameter 'weight' for model 'a'"),
    (
        two("della", "{weight: 1, density: 0.5, epsilon: 0.5}", "{weight: 1}"),
        r"line 5: model 'a', tensor '.*' \(weight 1.0, density 0.5, epsilon 0.5\): expected epsilon such that density - epsilon > 0 and density \+ epsilon < 1",
    ),
    (
        two("dare_ties", "{weight: 1, density: -0.1}", "{weight: 1}"),
        r"line 5: model 'a', .*: expected density >= 0",
    ),
    (
        two("slerp", "{}", "{}", "parameters: {t: 0.5}\n"),
        r"line 3: slerp merges 2 inputs \(the base included\); got 3",
    ),
    (two("slerp", "{}", "{}", base=False), r"slerp needs base_model: PATH"),
    (
        "merge_method: slerp\nbase_model: base\nmodels:\n  - model: a\n",
        r"slerp needs parameter 't'",
    ),
    (
        two("nuslerp", "{weight: 1}", "{weight: 1}").replace(
            "  - model: b\n    parameters: {weight: 1}\n", ""
        ),
        r"nuslerp merges 2 models besides the base; got 1",
    ),
    (
        "merge_method: model_stock\nbase_model: base\nmodels:\n  - model: a\n",
        r"model_stock merges 3 or more inputs \(the base included\); got 2",
    ),
    (
        two("passthrough", "{}", "{}", base=False),
        r"passthrough merges 1 input \(the base included\); got 2",
    ),
    (
        two("ties", "{weight: 1}", "{weight: 1}", "dtype: int8\n"),
        r"line 8: dtype 'int8': expected one of float64, float32, float16, bfloat16",
    ),
    (
        two("ties", "{weight: 1}", "{weight: 1}").replace("- model: b", "- model: a"),
        r"a model is listed twice",
    ),
    (
        SLICED.replace("      - model: base\n        layer_range: [0, 2]\n", ""),
        r"line 13: the base model 'base' is not among this slice's sources",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_value_is_one_line_naming_its_place(models, config, tmp_path, text, message):
    with pytest.raises(LazyParamsError, match=message) as caught:
        lazyparams.convert("merged", config(text), tmp_path / "out", progress=False)
    assert "\n" not in str(caught.value) and "merge.yml" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_random_seed_out_of_range_is_refused(models, config, tmp_path):
    path = config(two("dare_linear", "{weight: 1, density: 0.5}", "{weight: 1}"))
    with pytest.raises(
        LazyParamsError, match=r"random seed 4294967296: expected 0 <= seed < 2\*\*32"
    ):
        lazyparams.convert("merged:4294967296", path, tmp_path / "out", progress=False)


# Block by block ------------------------------------------------------------------------------

CHUNKED = [
    two("linear", "{weight: 0.7}", "{weight: 0.2}", base=False),
    two("task_arithmetic", "{weight: 0.7}", "{weight: 0.2}"),
    two("nuslerp", "{weight: 0.7}", "{weight: 0.2}"),
    two("model_stock", "{}", "{}"),
    "merge_method: slerp\nbase_model: base\nmodels:\n  - model: a\nparameters: {t: 0.3}\n",
]


@pytest.mark.parametrize("text", CHUNKED)
def test_under_a_budget_below_one_tensor_the_bytes_are_the_same(models, config, tmp_path, text):
    path = config(text)
    whole = merged(path, tmp_path / "whole")
    report = lazyparams.convert("merged", path, tmp_path / "rows", progress=False, budget=300)
    assert report.predicted_peak_bytes <= 300
    rows = load_file(str(tmp_path / "rows" / "model.safetensors"))
    assert all(rows[name].tobytes() == whole[name].tobytes() for name in whole)
