"""Output types as llama.cpp's converter spells them, and the type each tensor gets.

`f32`, `f16`, `bf16` and `q8_0` are the converter's `--outtype`; `auto` (its default) takes
bf16 or f16 from the first matrix of the checkpoint. The converter keeps in F32 every 1-D
tensor, every `*_norm.weight`, every tensor not named `.weight`, and the tensors a table marks
(MoE routers); a q8_0 tensor whose rows do not split into blocks of 32 falls back to F16.
The llama-quantize file types (Q4_K_M ...) start from the bf16 choice and then follow
`mixtures`. Imports the errors and the mixtures' tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.mixtures import FILE_TYPES

CONVERTER_TYPES: dict[str, tuple[str, int]] = {
    "f32": ("float32", FILE_TYPES["F32"]),
    "f16": ("float16", FILE_TYPES["F16"]),
    "bf16": ("bfloat16", FILE_TYPES["BF16"]),
    "q8_0": ("q8_0", FILE_TYPES["Q8_0"]),
}
"""--outtype -> (the dtype of quantizable tensors, general.file_type)."""

SHORT_DTYPES: dict[str, str] = {
    **{name: dtype for name, (dtype, _) in CONVERTER_TYPES.items() if name != "q8_0"},
    "fp32": "float32",
    "fp16": "float16",
}
"""The short float spellings `gguf:TYPE` and `cast:DTYPE` both take (f16, bf16, fp16, ...),
with the dtype each means; both also take the dtype's own name."""

Q8_0_BLOCK = 32


@dataclass(frozen=True, slots=True)
class OutputType:
    """A chosen output type: its name as given, the dtype for quantizable tensors (None for a
    llama-quantize mixture, which decides per tensor) and `general.file_type`."""

    name: str
    dtype: str | None
    file_type: int


def output_type(text: str, matrix_dtypes: Sequence[str]) -> OutputType:
    """Resolve TYPE of `gguf:TYPE` (case-insensitive); `matrix_dtypes` are the checkpoint's
    2-D+ tensors' dtypes in file order, for `auto`."""
    key = _converter_spelling(text.lower())
    if key == "auto":
        key = _guessed(matrix_dtypes)
    if key in CONVERTER_TYPES:
        dtype, file_type = CONVERTER_TYPES[key]
        return OutputType(key, dtype, file_type)
    mixtures = mixture_file_types()
    upper = text.upper()
    if upper in mixtures:
        return OutputType(upper, None, mixtures[upper])
    known = [*CONVERTER_TYPES, "auto", *mixtures]
    raise ConvertError(f"recipe 'gguf': unknown type {text!r}; expected one of {', '.join(known)}")


def _converter_spelling(key: str) -> str:
    """`key` as the converter spells its --outtype: `float16` and `fp16` are `f16`."""
    dtype = SHORT_DTYPES.get(key, key)
    return next((name for name, (d, _) in CONVERTER_TYPES.items() if d == dtype), key)


def mixture_file_types() -> dict[str, int]:
    """llama-quantize's file types this package can write, name -> general.file_type."""
    return {
        name: value
        for name, value in FILE_TYPES.items()
        if name.upper() not in ("F32", "F16", "BF16")
    }


def _guessed(matrix_dtypes: Sequence[str]) -> str:
    for dtype in matrix_dtypes:
        if dtype == "bfloat16":
            return "bf16"
        if dtype == "float16":
            return "f16"
    return "f16"


def converter_dtype(name: str, shape: tuple[int, ...], quantized: str, keep_f32: bool) -> str:
    """The dtype llama.cpp's converter writes tensor `name` in, for quantizable dtype
    `quantized` (float32, float16, bfloat16 or q8_0)."""
    if keep_f32 or len(shape) <= 1 or name.endswith("_norm.weight"):
        return "float32"
    if not name.endswith(".weight"):
        return "float32"
    if quantized == "q8_0" and shape[-1] % Q8_0_BLOCK:
        return "float16"
    return quantized
