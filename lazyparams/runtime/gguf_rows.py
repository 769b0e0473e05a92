"""The operand checks the GGML block quantizers share (legacy types and k-quants alike), called
directly or through the kernels: float32 rows of whole blocks in, uint8 rows of whole blocks
out, anything else a RuntimeExecError saying what was expected. Imports numpy and `errors`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lazyparams.errors import RuntimeExecError

Array = np.ndarray[Any, Any]


def check_float_rows(x: Array, kind: str, block: int) -> None:
    """`x` is float32 rows (rank 2) of whole blocks of `block` values, for `kind`."""
    if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.ndim != 2:
        got = f"{x.dtype} of rank {x.ndim}" if isinstance(x, np.ndarray) else type(x).__name__
        raise RuntimeExecError(f"{kind} quantization expects float32 rows (rank 2), got {got}")
    if x.shape[1] % block:
        raise RuntimeExecError(
            f"{kind} quantization expects rows of a multiple of {block} values, got {x.shape[1]}"
        )


def check_block_rows(q: Array, n: int, kind: str, block: int, size: int) -> None:
    """`q` is uint8 rows of the `size`-byte blocks of rows of `n` values (a multiple of
    `block`), for `kind`."""
    if not isinstance(q, np.ndarray) or q.dtype != np.uint8 or q.ndim != 2 or n % block:
        raise RuntimeExecError(
            f"{kind} dequantization expects uint8 rows and n a multiple of {block}"
        )
    if q.shape[1] != n // block * size:
        raise RuntimeExecError(
            f"{kind} rows of {n} values take {n // block * size} bytes, got {q.shape[1]}"
        )
