"""A model folder's config.json: what a transform or a target may read beside the tensors.

Hugging Face folders keep their hyperparameters in config.json next to the weights; a source
opened from a folder, or from a file in one, has that folder as its model folder. The JSON is
read with bounds (size, nesting) and every failure names the file. Imports the errors and
io.reasons only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lazyparams.errors import CheckpointError
from lazyparams.io.reasons import json_reason, os_reason, utf8_reason

CONFIG_NAME = "config.json"
MAX_CONFIG_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class ModelFolder:
    """A checkpoint's folder, its parsed config.json (None when it has none) and the path the
    checkpoint was opened from (None when it was given as an open source)."""

    path: Path
    config: Mapping[str, Any] | None
    source: Path | None = None

    @property
    def config_path(self) -> Path:
        """Where config.json is (or would be)."""
        return self.path / CONFIG_NAME

    @classmethod
    def at(cls, source_path: Path) -> ModelFolder:
        """The model folder of a checkpoint path: the folder itself, or a file's folder."""
        folder = source_path if source_path.is_dir() else source_path.parent
        config_path = folder / CONFIG_NAME
        config = read_config(config_path) if config_path.is_file() else None
        return cls(folder, config, source_path)

    def require_config(self, what: str) -> tuple[Mapping[str, Any], Path]:
        """The config and its path; CheckpointError saying `what` needs it when absent."""
        if self.config is None:
            raise CheckpointError(
                f"{self.config_path}: not found; {what} reads a Hugging Face model folder "
                "(config.json beside the weights)"
            )
        return self.config, self.config_path


def _reason(err: Exception) -> str:
    """Why config.json could not be read, in our words."""
    if isinstance(err, OSError):
        return os_reason(err)
    if isinstance(err, UnicodeDecodeError):
        return f"not UTF-8 text: {utf8_reason(err)}"
    if isinstance(err, json.JSONDecodeError):
        return json_reason(err)
    if isinstance(err, RecursionError):
        return "it nests too deep"
    return "it holds a number too long to read"  # json's refusal of over 4300 digits


def read_config(path: Path) -> dict[str, Any]:
    """config.json as a dict; CheckpointError naming the file when it is not a JSON object."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise CheckpointError(
                f"{path}: {size} bytes; expected a config.json under {MAX_CONFIG_BYTES} bytes"
            )
        data = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise CheckpointError(f"{path}: not a readable JSON file: {_reason(err)}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
