"""The built-in recipes, each registered by one entry in `BUILT_IN`, and the SPEC resolver.

A recipe maps a read-only mapping of traced tensors to a dict of outputs. Recipes compose with
`+` (`fuse-qkv+cast:float16`, see engine.recipe_registry): each one sees the outputs of the one
before, and the layout facts they establish (which linear weights are now stored (in, out)).
A SPEC is a recipe expression or a Python file defining `transform(params)`. Imports the
frontend, and targets for the `gguf` recipe.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from lazyparams.engine.recipe_registry import (
    RECIPES,
    RecipeEntry,
    Weights,
    register_recipe,
)
from lazyparams.engine.recipe_registry import recipe as recipe
from lazyparams.errors import ConvertError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.ir import IRModule
from lazyparams.ir.dtype import is_block
from lazyparams.targets.llamacpp.outtype import SHORT_DTYPES

# (fused name, member names) per attention/MLP group, Hugging Face llama and BERT spellings.
_FUSE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("self_attn.qkv_proj", ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("mlp.gate_up_proj", ("mlp.gate_proj", "mlp.up_proj")),
    ("attention.self.qkv", ("attention.self.query", "attention.self.key", "attention.self.value")),
)
# Linear layers of both families: llama *_proj and lm_head, BERT query/key/value/dense/classifier.
_LINEAR = re.compile(r"(_proj|\.dense|\.query|\.key|\.value|\.qkv|lm_head|classifier)\.weight$")
CAST_DTYPES: dict[str, str] = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float8": "float8_e4m3fn",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}
"""Targets of `cast:<dtype>`; `float8` means float8_e4m3fn."""


# Recipes -----------------------------------------------------------------------------------


def fuse_qkv(params: Mapping[str, Tensor]) -> dict[str, Any]:
    """Fuse q/k/v and gate/up (weights and biases) and transpose every linear weight to (in, out).

    Linear layers store (out, in); a compiled matmul wants (in, out), so fused weights are
    concatenated along `out` and then transposed. Each fused tensor takes the place of its
    first member; tensors of no group pass through unchanged (linear weights transposed).
    """
    return _fuse_qkv(Weights(dict(params))).tensors


def _fuse_qkv(weights: Weights) -> Weights:
    params = weights.tensors
    fused_at = _fused_groups(params)
    consumed = {member for _, members in fused_at.values() for member in members}
    out: dict[str, Any] = {}
    in_out: set[str] = set(weights.in_out)
    for name, value in params.items():
        group = fused_at.get(name)
        if group is not None:
            fused_name, members = group
            joined = ops.concat([params[m] for m in members], axis=0)
            is_weight = fused_name.endswith(".weight")
            out[fused_name] = joined.T if is_weight else joined
            if is_weight:
                in_out.add(fused_name)
        elif name not in consumed:
            out[name] = _transposed(name, value, in_out)
    return Weights(out, frozenset(in_out))


def _transposed(name: str, value: Any, in_out: set[str]) -> Any:
    """A linear weight in (in, out) layout (recorded in `in_out`); anything else as it is."""
    if name in in_out or not _LINEAR.search(name) or value.ndim != 2:
        return value
    in_out.add(name)
    return value.T


def _fused_groups(params: Mapping[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """First member name -> (fused name, member names), for every complete group's weight and
    bias (a bias group fuses only if every member has a bias)."""
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for fused, members in _FUSE_GROUPS:
        suffix = f"{members[0]}.weight"
        for name in params:
            if not name.endswith(suffix):
                continue
            prefix = name[: -len(suffix)]
            for kind in ("weight", "bias"):
                names = tuple(f"{prefix}{m}.{kind}" for m in members)
                if all(n in params for n in names):
                    found[names[0]] = (f"{prefix}{fused}.{kind}", names)
    return found


def _is_matrix_weight(name: str, value: Any) -> bool:
    return name.endswith("weight") and value.ndim == 2 and value.dtype.startswith(("float", "bf"))


def _is_embedding(name: str) -> bool:
    return "embed" in name or name.endswith(("wte.weight", "wpe.weight"))


def quantize_int8(params: Mapping[str, Tensor]) -> dict[str, Any]:
    """Symmetric per-output-channel int8 of 2-D float weights (not embeddings).

    Layout (safetensors-style, not GGML's): `<name>` is int8 of the weight's shape, values in
    [-127, 127]; `<name>_scale` is float32, one scale per output channel (axis 0 of an (out, in)
    weight, axis 1 of one stored (in, out)); the weight is `q * scale`. Written to GGUF these
    are plain I8 and F32 tensors; llama.cpp's quantized types are GGML block types
    (`ops.quantize_gguf`, e.g. q8_0)."""
    return _quantize_int8(Weights(dict(params))).tensors


def _quantize_int8(weights: Weights) -> Weights:
    out: dict[str, Any] = {}
    for name, value in weights.tensors.items():
        if _is_matrix_weight(name, value) and not _is_embedding(name):
            axis = 1 if name in weights.in_out else 0
            out[name], out[f"{name}_scale"] = ops.quantize_int8(value, axis=axis)
        else:
            out[name] = value
    return replace(weights, tensors=out)


def quantize_int4(params: Mapping[str, Tensor], group_size: int = 32) -> dict[str, Any]:
    """Group-wise int4 of 2-D weights whose input dim splits into groups of `group_size`.

    Layout (safetensors-style, not GGML's): `<name>` is uint8 (out, in/2), two values a byte
    (value 2j in the low nibble, 2j + 1 in the high one), each in [-8, 7] stored as its two's
    complement nibble; `<name>_scale` is float32 (out, in/group_size); a value is
    `nibble * scale` of its group. Other tensors pass through. GGUF has no uint8 type, so a
    .gguf destination refuses it; GGML's 4-bit types (`ops.quantize_gguf`, q4_0 or q4_k) are
    what llama.cpp reads."""
    return _quantize_int4(Weights(dict(params)), group_size).tensors


def _quantize_int4(weights: Weights, group_size: int) -> Weights:
    out: dict[str, Any] = {}
    in_out = set(weights.in_out)
    for name, value in weights.tensors.items():
        # groups run along the input dim, which is axis 1 of the (out, in) layout the op takes
        matrix = value.T if name in in_out else value
        fits = _is_matrix_weight(name, value) and matrix.shape[1] % group_size == 0
        if fits and not _is_embedding(name):
            out[name], out[f"{name}_scale"] = ops.quantize_int4(matrix, group_size=group_size)
            in_out.discard(name)
        else:
            out[name] = value
    return Weights(out, frozenset(in_out))


def cast(params: Mapping[str, Tensor], dtype: str = "float16") -> dict[str, Any]:
    """Cast every floating-point tensor to `dtype` (GGML block tensors are dequantized to it);
    other tensors pass through."""
    return _cast(Weights(dict(params)), dtype).tensors


def _cast(weights: Weights, dtype: str) -> Weights:
    target = _cast_target(dtype)
    out = {
        name: value.astype(target) if _needs_cast(value, target) else value
        for name, value in weights.tensors.items()
    }
    return replace(weights, tensors=out)


def _needs_cast(value: Any, target: str) -> bool:
    """Float tensors not yet in `target`, and GGML block tensors (dequantized by the cast)."""
    floating = value.dtype.startswith(("float", "bf")) or is_block(value.dtype)
    return bool(floating and value.dtype != target)


def _cast_target(dtype: str) -> str:
    dtype = SHORT_DTYPES.get(dtype.lower(), dtype)
    if dtype not in CAST_DTYPES:
        raise ConvertError(
            f"recipe 'cast': expected one of {', '.join(CAST_DTYPES)}, got {dtype!r}"
        )
    return CAST_DTYPES[dtype]


def drop(params: Mapping[str, Tensor], patterns: tuple[str, ...]) -> dict[str, Any]:
    """Leave out every tensor whose name matches one of the glob `patterns`
    (`*.rotary_emb.inv_freq`); the rest pass through. A dropped tensor is never read."""
    return _drop(Weights(dict(params)), patterns).tensors


def _drop(weights: Weights, patterns: tuple[str, ...]) -> Weights:
    names = list(weights.tensors)
    unmatched = [p for p in patterns if not any(fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise ConvertError(
            f"recipe 'drop': pattern {unmatched[0]!r} matches no tensor; expected a glob of "
            f"tensor names such as {names[0] + '*' if names else '*.inv_freq'!r}"
        )
    kept = {
        name: value
        for name, value in weights.tensors.items()
        if not any(fnmatchcase(name, p) for p in patterns)
    }
    if not kept:
        raise ConvertError(f"recipe 'drop': {','.join(patterns)!r} matches every tensor")
    return Weights(kept, weights.in_out & kept.keys())


# Registration ------------------------------------------------------------------------------


def _group_size(text: str) -> int:
    if not text.isdigit() or int(text) == 0 or int(text) % 2:
        raise ValueError("expected a positive even group size")
    return int(text)


def _cast_argument(text: str) -> str:
    name = SHORT_DTYPES.get(text.lower(), text)
    if name not in CAST_DTYPES:
        raise ValueError(f"expected one of {', '.join([*CAST_DTYPES, *SHORT_DTYPES])}")
    return CAST_DTYPES[name]


def _globs(text: str) -> tuple[str, ...]:
    patterns = tuple(p.strip() for p in text.split(","))
    if not all(patterns):
        raise ValueError("expected globs of tensor names joined with ',', e.g. *.inv_freq")
    return patterns


def gguf_target(type_name: str | None = None, pre: str | None = None) -> Any:
    """The `gguf[:TYPE]` recipe; `pre` names the BPE pre-tokenizer where the folder's is new."""
    from lazyparams.targets.llamacpp.target import DEFAULT_TYPE, GGUFTarget

    return GGUFTarget(type_name or DEFAULT_TYPE, pre)


BUILT_IN = (
    RecipeEntry(
        "fuse-qkv",
        "fuse q/k/v and gate/up (weights, biases); transpose every linear weight to (in, out)",
        _fuse_qkv,
    ),
    RecipeEntry(
        "quantize-int8",
        "int8 per output channel of 2-D float weights (not embeddings), plus NAME_scale",
        _quantize_int8,
    ),
    RecipeEntry(
        "quantize-int4",
        "int4 in groups along the input dim (default 32), two a byte, plus NAME_scale",
        _quantize_int4,
        _group_size,
        32,
        "quantize-int4[:GROUP]",
    ),
    RecipeEntry(
        "cast",
        "cast float tensors to DTYPE (default float16; f16, bf16, float8 too)",
        _cast,
        _cast_argument,
        "float16",
        "cast[:DTYPE]",
    ),
    RecipeEntry(
        "drop",
        "leave out the tensors whose names match a glob (*.rotary_emb.inv_freq)",
        _drop,
        _globs,
        usage="drop:GLOB[,GLOB...]",
    ),
    RecipeEntry(
        "gguf",
        "a Hugging Face model folder to llama.cpp's GGUF; TYPE: auto (default), f32, f16, "
        "bf16, q8_0 or a llama-quantize type such as Q4_K_M",
        usage="gguf[:TYPE]",
        output_format="gguf",
        target=gguf_target,
    ),
)
for _entry in BUILT_IN:
    register_recipe(_entry)

RECIPE_NAMES: tuple[str, ...] = tuple(RECIPES)
"""The built-in recipes' names."""


# SPEC --------------------------------------------------------------------------------------


def load_spec(spec: str | os.PathLike[str] | Callable[..., Any]) -> Callable[..., Any]:
    """Resolve SPEC: a callable, a Python file defining `transform(params)`, or a recipe."""
    if callable(spec):
        return spec
    text = os.fspath(spec)
    if isinstance(spec, os.PathLike) or text.endswith(".py"):
        return _load_file(Path(text))
    return recipe(text)


def spec_name(spec: str | os.PathLike[str] | Callable[..., Any]) -> str:
    """How reports name SPEC: the recipe expression, the file, or the function's name."""
    if callable(spec):
        return str(getattr(spec, "__name__", repr(spec)))
    return os.fspath(spec)


def _load_file(path: Path) -> Callable[..., Any]:
    transform: Callable[..., Any] | IRModule = load_spec_file(path)[0]
    if isinstance(transform, IRModule):
        raise ConvertError(
            f"{path}: defines a model module as `transform`; pass the file itself as SPEC to "
            "convert or plan (load_spec returns functions only)"
        )
    return transform


def load_spec_file(path: Path) -> tuple[Any, Callable[..., Any] | None]:
    """A spec file's `transform` (a function, or a model IRModule) and, when it defines one,
    its `metadata(config)`."""
    if not path.is_file():
        raise ConvertError(f"{path}: spec file not found; expected a .py file or a recipe name")
    module_spec = importlib.util.spec_from_file_location(f"lazyparams_spec_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ConvertError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module  # so that script decorators can read its source
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as err:
        raise ConvertError(f"{path}:{err.lineno}: syntax error: {err.msg}") from None
    except Exception as err:  # the user's module failed on import: report, don't crash
        raise ConvertError(
            f"{path}: loading the spec failed: {type(err).__name__}: {err}"
        ) from None
    transform = getattr(module, "transform", None)
    if not callable(transform) and not isinstance(transform, IRModule):
        raise ConvertError(
            f"{path}: expected a function `transform(params)`, found none (a model module is "
            "given as `transform = Module`, an IRModule whose model function has num_input)"
        )
    metadata = getattr(module, "metadata", None)
    return transform, metadata if callable(metadata) else None
