"""GGML's K-quant block types (q2_k ... q6_k): their quantizers and dequantizers.

`QUANTIZE` and `DEQUANTIZE` map a type name to a function over rows, in the signatures of
`runtime.gguf_quants`; no K-quant kernels are defined here yet, so those types are quantized
nowhere and dequantized through gguf-py. Imports numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

QUANTIZE: dict[str, Callable[[Array], Array]] = {}
DEQUANTIZE: dict[str, Callable[[Array, int], Array]] = {}
