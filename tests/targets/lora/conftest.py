"""Fixtures of the LoRA tests: a base model and a writer of adapter folders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.targets.lora.peft_reference import base_tensors, write_adapter, write_base


@pytest.fixture
def base(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A float32 base model in tmp_path/base, and its tensors."""
    tensors = base_tensors()
    return write_base(tmp_path / "base", tensors), tensors


@pytest.fixture
def adapter(tmp_path: Path) -> Callable[..., Path]:
    """Write an adapter folder tmp_path/NAME: `adapter(name, tensors, **config)`."""

    def write(name: str, tensors: dict[str, np.ndarray], **config: Any) -> Path:
        return write_adapter(tmp_path / name, tensors, **config)

    return write
