"""ggml's own reference quantizers, loaded with ctypes from the `libggml-python` wheel.

`oracle()` gives an `Oracle` whose `quantize(type, x)` runs `quantize_row_<type>_ref` and whose
`dequantize(type, q, n)` runs `dequantize_row_<type>` on float32 rows; tests that need it call
`require_oracle()`, which skips them with a message where the library cannot be loaded.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazyparams.ir.dtype import block_type

Array = np.ndarray[Any, Any]
_C_NAMES = {"q2_k": "q2_K", "q3_k": "q3_K", "q4_k": "q4_K", "q5_k": "q5_K", "q6_k": "q6_K"}


class Oracle:
    """The reference row functions of one loaded libggml-base."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib

    def has_quantizer(self, type_name: str) -> bool:
        """Whether the library exports `quantize_row_<type>_ref`."""
        return hasattr(self._lib, f"quantize_row_{_c_name(type_name)}_ref")

    def quantize(self, type_name: str, x: Array) -> Array:
        """ggml's reference bytes of the float32 rows `x` (rows quantized one by one)."""
        block = block_type(type_name)
        rows = np.ascontiguousarray(x, np.float32).reshape(-1, x.shape[-1])
        out = np.zeros((rows.shape[0], block.row_bytes(rows.shape[1])), np.uint8)
        fn = getattr(self._lib, f"quantize_row_{_c_name(type_name)}_ref")
        fn.restype = None
        for row, dst in zip(rows, out, strict=True):
            fn(_pointer(row), _pointer(dst), ctypes.c_int64(rows.shape[1]))
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def dequantize(self, type_name: str, q: Array, n: int) -> Array:
        """ggml's float32 values of the block rows `q`, `n` values a row."""
        rows = np.ascontiguousarray(q, np.uint8).reshape(-1, q.shape[-1])
        out = np.zeros((rows.shape[0], n), np.float32)
        fn = getattr(self._lib, f"dequantize_row_{_c_name(type_name)}")
        fn.restype = None
        for row, dst in zip(rows, out, strict=True):
            fn(_pointer(row), _pointer(dst), ctypes.c_int64(n))
        return out.reshape(*q.shape[:-1], n)


def _c_name(type_name: str) -> str:
    return _C_NAMES.get(type_name, type_name)


def _pointer(array: Array) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


@functools.cache
def oracle() -> Oracle | str:
    """The loaded oracle, or the reason it could not be loaded."""
    spec = importlib.util.find_spec("libggml")
    if spec is None or spec.origin is None:
        return "libggml-python is not installed (it is in the `test` extra)"
    root = Path(spec.origin).parent
    for candidate in (root / "lib64" / "libggml-base.so", root / "lib" / "libggml-base.so"):
        if candidate.exists():
            try:
                return Oracle(ctypes.CDLL(str(candidate)))
            except OSError as err:
                return f"cannot load {candidate.name}: {err}"
    return "libggml-python ships no libggml-base.so for this platform"


def require_oracle() -> Oracle:
    """The oracle, or skip the calling test saying why it is missing."""
    found = oracle()
    if isinstance(found, str):
        pytest.skip(f"ggml reference oracle unavailable: {found}")
    return found
