"""Checks the family tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

import lazyparams
from lazyparams.errors import LazyParamsError


def refused(tmp_path: Path, folder: Path, *needles: str, spec: str = "gguf:f16") -> None:
    """Converting `folder` with `spec` is refused with a message holding every needle, and
    nothing is left at the destination."""
    dst = tmp_path / "out.gguf"
    with pytest.raises(LazyParamsError) as info:
        lazyparams.convert(spec, folder, dst, progress=False)
    for needle in needles:
        assert needle in str(info.value)
    assert not dst.exists()
