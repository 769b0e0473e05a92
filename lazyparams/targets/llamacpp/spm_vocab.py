"""A sentencepiece `tokenizer.model` as llama.cpp's `llama` tokenizer metadata.

Pieces, scores and token types come from sentencepiece itself; added tokens from
added_tokens.json and tokenizer_config.json override them as llama.cpp's converter does, and the
vocabulary is padded to config.json's vocab_size with `[PAD{i}]` tokens. Imports gguf,
sentencepiece (lazily), the package's errors and the sibling tokenizer_files.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gguf

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.tokenizer_files import (
    config_vocab_size,
    import_extra,
    json_section,
    read_json,
    special_vocab,
)

_PAD_SCORE = -10000.0
_ADDED_SCORE = -1000.0
_SENTENCEPIECE_SPACE = "\u2581"


def sentencepiece_vocab(
    writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None
) -> None:
    """Record model, pre, tokens, scores, types and the special tokens of `tokenizer.model`."""
    path = model_dir / "tokenizer.model"
    if pre not in (None, "default"):
        raise ConvertError(
            f"{path}: a sentencepiece tokenizer has no BPE pre-tokenizer (llama.cpp writes "
            f"'default'); --gguf-pre {pre} applies to a BPE tokenizer.json only"
        )
    processor = _load_processor(path)
    vocab_size = _vocab_size(model_dir, processor, config)
    tokens, scores, types = _base_pieces(processor, vocab_size)
    _apply_added_tokens_json(model_dir, tokens, scores, types)
    _apply_added_tokens_decoder(model_dir, tokens, scores, types)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    special_vocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer, quiet=True)


def _load_processor(path: Path) -> Any:
    """Load `tokenizer.model` with sentencepiece; a file it cannot parse is named."""
    sentencepiece = import_extra("sentencepiece", path)
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromFile(str(path))
    except (OSError, RuntimeError) as exc:
        raise ConvertError(f"{path}: not a readable sentencepiece model ({exc})") from exc
    return processor


def _vocab_size(model_dir: Path, processor: Any, config: Mapping[str, Any]) -> int:
    """config.json's vocab_size (the tokenizer's own when absent); never below the tokenizer's."""
    pieces = int(processor.vocab_size())
    vocab_size = config_vocab_size(model_dir, config, pieces)
    if vocab_size < pieces:
        raise ConvertError(
            f"{model_dir / 'tokenizer.model'}: {pieces} pieces, more than config.json's "
            f"vocab_size {vocab_size}; the embedding has no row for the rest"
        )
    return vocab_size


def _base_pieces(processor: Any, vocab_size: int) -> tuple[list[bytes], list[float], list[int]]:
    """Every piece's bytes, score and type; ids past the model are `[PAD{i}]`, unused."""
    tokens = [f"[PAD{i}]".encode() for i in range(vocab_size)]
    scores = [_PAD_SCORE] * vocab_size
    types = [int(gguf.TokenType.UNUSED)] * vocab_size
    for token_id in range(processor.vocab_size()):
        tokens[token_id] = processor.IdToPiece(token_id).encode("utf-8")
        scores[token_id] = processor.GetScore(token_id)
        types[token_id] = _piece_type(processor, token_id)
    return tokens, scores, types


def _piece_type(processor: Any, token_id: int) -> int:
    """The GGUF token type sentencepiece's own flags give one piece."""
    if processor.IsUnknown(token_id):
        return int(gguf.TokenType.UNKNOWN)
    if processor.IsControl(token_id):
        return int(gguf.TokenType.CONTROL)
    if processor.IsUnused(token_id):
        return int(gguf.TokenType.UNUSED)
    if processor.IsByte(token_id):
        return int(gguf.TokenType.BYTE)
    return int(gguf.TokenType.NORMAL)


def _apply_added_tokens_json(
    model_dir: Path, tokens: list[bytes], scores: list[float], types: list[int]
) -> None:
    """added_tokens.json's tokens, user-defined; ids past the vocabulary skipped (llama.cpp)."""
    path = model_dir / "added_tokens.json"
    for content, token_id in read_json(path).items():
        if not isinstance(token_id, int) or token_id < 0:
            raise ConvertError(
                f"{path}: token {content!r} has id {token_id!r}, not an integer >= 0"
            )
        if token_id < len(tokens):
            tokens[token_id] = content.encode("utf-8")
            scores[token_id] = _ADDED_SCORE
            types[token_id] = int(gguf.TokenType.USER_DEFINED)


def _apply_added_tokens_decoder(
    model_dir: Path, tokens: list[bytes], scores: list[float], types: list[int]
) -> None:
    """tokenizer_config.json's added_tokens_decoder: control when special, else user-defined."""
    path = model_dir / "tokenizer_config.json"
    decoder = json_section(path, "added_tokens_decoder")
    for key, entry in decoder.items():
        token_id, content = _decoder_entry(path, key, entry)
        if token_id >= len(tokens):
            continue
        if entry.get("special") or looks_special(content):
            types[token_id] = int(gguf.TokenType.CONTROL)
        else:
            content = content.replace(_SENTENCEPIECE_SPACE, " ")
            types[token_id] = int(gguf.TokenType.USER_DEFINED)
        scores[token_id] = _ADDED_SCORE
        tokens[token_id] = content.encode("utf-8")


def _decoder_entry(path: Path, key: str, entry: Any) -> tuple[int, str]:
    """One added_tokens_decoder entry's id and content, or an error naming it."""
    content = entry.get("content") if isinstance(entry, dict) else None
    if not key.isdigit() or not isinstance(content, str):
        raise ConvertError(
            f"{path}: added_tokens_decoder entry {key!r} must map an id to an object "
            "with a 'content' string"
        )
    return int(key), content


def looks_special(text: str) -> bool:
    """Whether an added token's text marks it as a control token in llama.cpp's converter."""
    return (
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (text.startswith("<|") and text.endswith("|>"))
        or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
        or (text.startswith("<unused") and text.endswith(">"))
    )
