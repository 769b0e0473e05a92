"""Byte sizes as people write them (`512MiB`, `4GiB`, `5GB`) and as reports print them.

Binary units (KiB, MiB, GiB, TiB, and the bare K, M, G, T) are powers of 1024; decimal units
(kB, MB, GB, TB) are powers of 1000, as Hugging Face shard sizes are. Imports `analysis`.
"""

from __future__ import annotations

import re

from lazyparams.analysis.memory import format_bytes
from lazyparams.errors import ConvertError

_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")

__all__ = ["format_bytes", "parse_size", "size_or_none"]


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes of `text` (`512MiB`, `1.5GiB`, `5GB`, `1024`); an int is taken as bytes.

    Raises ConvertError, naming `what`, for anything else or for a negative int.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ConvertError(f"{what}: expected zero or more bytes, got {text}")
        return text
    match = _SIZE.fullmatch(text) if isinstance(text, str) else None
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ConvertError(f"{what}: expected a size like 512MiB, 4GiB or 5GB, got {text!r}")
    from decimal import Decimal  # exact for "1.5GiB"; loaded by the sizes given only

    return int(Decimal(match.group(1)) * _UNITS[unit])


def size_or_none(text: str | int | None, what: str) -> int | None:
    """`parse_size(text)`, or None when no size was given."""
    return None if text is None else parse_size(text, what)
