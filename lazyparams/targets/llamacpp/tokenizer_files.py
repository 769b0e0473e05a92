"""Reading a model folder's tokenizer files, with errors that name the file.

The JSON files, gguf-py's `SpecialVocab` over them, and the lazy imports of the `llamacpp`
extra (sentencepiece, tokenizers). Imports gguf and the package's errors only.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import gguf

from lazyparams.errors import ConvertError

#: Tokenizer kinds read here, as an error message lists them.
SUPPORTED_KINDS = (
    "sentencepiece tokenizer.model",
    "byte-level BPE tokenizer.json (GPT-2 / Llama-3 / Qwen2 kind)",
)


def unsupported(model_dir: Path, what: str) -> NoReturn:
    """Refuse a tokenizer kind this package does not read, listing the kinds it does."""
    raise ConvertError(
        f"{model_dir}: {what} is not a supported tokenizer; supported: "
        + "; ".join(SUPPORTED_KINDS)
    )


def import_extra(module: str, path: Path) -> Any:
    """Import a module of the `llamacpp` extra, or say how to install it to read `path`."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConvertError(
            f"{path}: reading it needs the {module} package: pip install 'lazyparams[llamacpp]'"
        ) from exc


def read_json(path: Path, *, required: bool = False) -> dict[str, Any]:
    """A JSON object file's content ({} when absent and not required); errors name the file."""
    if not path.is_file():
        if required:
            raise ConvertError(f"{path}: not found; the tokenizer needs it")
        return {}
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConvertError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    return _parse_json_object(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _parse_json_object(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    """Parse one file as a JSON object, or say where it is broken (cached by its stat)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConvertError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConvertError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConvertError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def config_vocab_size(model_dir: Path, config: Mapping[str, Any], default: int) -> int:
    """config.json's vocab_size, or `default` (the tokenizer's own size) when it has none."""
    vocab_size = config.get("vocab_size") or default
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise ConvertError(
            f"{model_dir / 'config.json'}: vocab_size must be an integer, found {vocab_size!r}"
        )
    return vocab_size


def json_section(path: Path, key: str) -> dict[str, Any]:
    """One object-valued entry of a JSON file ({} when absent); anything else is named."""
    section = read_json(path).get(key)
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConvertError(f"{path}: {key!r} must be a JSON object, found {type(section).__name__}")
    return section


def special_vocab(model_dir: Path, **options: Any) -> Any:
    """gguf-py's SpecialVocab of the folder, after its JSON files were checked to parse."""
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.json"):
        read_json(model_dir / name)
    try:
        return gguf.SpecialVocab(model_dir, **options)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConvertError(
            f"{model_dir}: the special tokens of tokenizer.json / tokenizer_config.json cannot "
            f"be read ({exc})"
        ) from exc
