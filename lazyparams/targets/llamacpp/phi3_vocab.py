"""The vocabulary of llama.cpp's phi3 architecture, by the converter's Phi-3 rules.

Phi-4 ships a GPT-2 style byte-level BPE (`tokenizer_class` GPT2Tokenizer in
tokenizer_config.json): read as every byte-level BPE is. Phi-3 and Phi-3.5 ship a sentencepiece
`tokenizer.model`, read by rules of their own: the pieces padded to config.json's vocab_size as
`[PAD{i}]`, then the added tokens of added_tokens.json, of tokenizer_config.json's
added_tokens_decoder and of tokenizer.json's added_tokens, each user-defined, or control when
marked special (no guessing from the text, no sentencepiece space undone, unlike the llama
rules). Imports gguf, the package's errors and the sibling tokenizer modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import gguf

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.bpe_vocab import bpe_vocab
from lazyparams.targets.llamacpp.tokenizer_files import (
    config_vocab_size,
    import_extra,
    json_section,
    read_json,
    special_vocab,
)

_PAD_SCORE = -10000.0
_ADDED_SCORE = -1000.0


def phi3_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """Record the tokenizer metadata of a Phi-3 family folder, as the converter writes it."""
    tokenizer_config = read_json(model_dir / "tokenizer_config.json")
    if tokenizer_config.get("tokenizer_class") == "GPT2Tokenizer":
        bpe_vocab(writer, model_dir, config, pre)
        return
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        raise ConvertError(
            f"{path}: not found; a Phi-3 tokenizer is a sentencepiece tokenizer.model "
            "(Phi-4's byte-level BPE says tokenizer_class GPT2Tokenizer in tokenizer_config.json)"
        )
    if pre not in (None, "default"):
        raise ConvertError(
            f"{path}: a sentencepiece tokenizer has no BPE pre-tokenizer (llama.cpp writes "
            f"'default'); --gguf-pre {pre} applies to a BPE tokenizer.json only"
        )
    tokens, scores, types = _pieces(model_dir, path, config)
    for content, token_id, special in _added_tokens(model_dir, len(tokens)):
        tokens[token_id] = content.encode("utf-8")
        scores[token_id] = _ADDED_SCORE
        types[token_id] = int(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    special_vocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer, quiet=True)


def _pieces(
    model_dir: Path, path: Path, config: Mapping[str, Any]
) -> tuple[list[bytes], list[float], list[int]]:
    """The sentencepiece pieces with their scores and types, padded to the vocabulary size."""
    processor = import_extra("sentencepiece", path).SentencePieceProcessor()
    try:
        processor.LoadFromFile(str(path))
    except (OSError, RuntimeError) as exc:
        raise ConvertError(f"{path}: not a readable sentencepiece model ({exc})") from exc
    count = int(processor.vocab_size())
    size = config_vocab_size(model_dir, config, count)
    if size < count:
        raise ConvertError(
            f"{path}: {count} pieces, more than config.json's vocab_size {size}; the embedding "
            "has no row for the rest"
        )
    tokens = [f"[PAD{i}]".encode() for i in range(size)]
    scores = [_PAD_SCORE] * size
    types = [int(gguf.TokenType.UNUSED)] * size
    for token_id in range(count):
        tokens[token_id] = processor.IdToPiece(token_id).encode("utf-8")
        scores[token_id] = processor.GetScore(token_id)
        types[token_id] = _piece_type(processor, token_id)
    return tokens, scores, types


def _piece_type(processor: Any, token_id: int) -> int:
    if processor.IsUnknown(token_id):
        return int(gguf.TokenType.UNKNOWN)
    if processor.IsControl(token_id):
        return int(gguf.TokenType.CONTROL)
    if processor.IsUnused(token_id):
        return int(gguf.TokenType.UNUSED)
    if processor.IsByte(token_id):
        return int(gguf.TokenType.BYTE)
    return int(gguf.TokenType.NORMAL)


def _added_tokens(model_dir: Path, size: int) -> Iterable[tuple[str, int, bool]]:
    """(content, id, special) of every added token, in the converter's order of files; ids of
    added_tokens.json past the vocabulary are skipped, as the converter skips them, and the
    other files' are refused (the converter fails on them)."""
    path = model_dir / "added_tokens.json"
    for content, token_id in read_json(path).items():
        if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0:
            raise ConvertError(f"{path}: token {content!r} has id {token_id!r}, not an integer")
        if token_id < size:
            yield content, token_id, False
    path = model_dir / "tokenizer_config.json"
    for key, entry in json_section(path, "added_tokens_decoder").items():
        yield _checked(path, key, entry, size)
    path = model_dir / "tokenizer.json"
    listed = read_json(path).get("added_tokens", [])
    if not isinstance(listed, list):
        raise ConvertError(f"{path}: 'added_tokens' must be a list")
    for entry in listed:
        token_id = entry.get("id") if isinstance(entry, dict) else None
        yield _checked(path, str(token_id), entry, size)


def _checked(path: Path, key: str, entry: Any, size: int) -> tuple[str, int, bool]:
    """One added token entry's content, id and special flag, or an error naming it."""
    content = entry.get("content") if isinstance(entry, dict) else None
    if not key.isdigit() or not isinstance(content, str):
        raise ConvertError(
            f"{path}: added token {key!r} must have an integer id and a 'content' string"
        )
    if int(key) >= size:
        raise ConvertError(
            f"{path}: added token {content!r} has id {key}, past config.json's vocab_size {size}"
        )
    return content, int(key), bool(entry.get("special"))
