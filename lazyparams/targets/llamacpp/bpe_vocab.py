"""A byte-level BPE `tokenizer.json` as llama.cpp's `gpt2` tokenizer metadata.

Tokens and their types come from the `tokenizers` library (the Rust tokenizer transformers wraps),
merges and special tokens from gguf-py's SpecialVocab, and the pre-tokenizer's name from the hash
llama.cpp's converter computes (table in `bpe_pre`), or from the user. Imports gguf, tokenizers
(lazily), the package's errors and the sibling tokenizer modules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gguf

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.bpe_pre import CHECK_TEXT, KNOWN_PRE_HASHES, KNOWN_PRE_NAMES
from lazyparams.targets.llamacpp.spm_vocab import looks_special
from lazyparams.targets.llamacpp.tokenizer_files import (
    config_vocab_size,
    import_extra,
    json_section,
    read_json,
    special_vocab,
    unsupported,
)

_SENTENCEPIECE_SPACE = "\u2581"


SpecialIds = Callable[[Any, Path], Mapping[str, int]]
"""(the loaded tokenizer, its folder) -> special token ids a family's converter sets by hand
(kind -> id); as there, a kind the folder's files already name keeps their id."""


def bpe_vocab(
    writer: Any,
    model_dir: Path,
    config: Mapping[str, Any],
    pre: str | None,
    special_ids: SpecialIds | None = None,
) -> None:
    """Record model `gpt2`, pre, tokens, types, merges and the special tokens of tokenizer.json
    (and those `special_ids` gives, where a family's converter sets some by hand)."""
    path = model_dir / "tokenizer.json"
    read_json(path, required=True)
    if json_section(path, "model").get("type") != "BPE":
        unsupported(model_dir, f"a {path.name} whose model is not BPE")
    tokenizer = _load_tokenizer(path)
    tokens, types = _tokens_and_types(model_dir, tokenizer, config)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(resolve_pre(model_dir, pre_hash(tokenizer), pre))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    special = special_vocab(model_dir, load_merges=True)
    for kind, token_id in (special_ids(tokenizer, model_dir) if special_ids else {}).items():
        special._set_special_token(kind, token_id)
    _bytelevel_add_flags(special, read_json(path))
    special.add_to_gguf(writer, quiet=True)


def _load_tokenizer(path: Path) -> Any:
    """Load tokenizer.json with the tokenizers library; a file it cannot parse is named."""
    tokenizers = import_extra("tokenizers", path)
    try:
        return tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception for a malformed file
        raise ConvertError(f"{path}: not a readable tokenizers file ({exc})") from exc


def pre_hash(tokenizer: Any) -> str:
    """The sha256 llama.cpp names a pre-tokenizer by: of the check text's ids, specials added."""
    ids = tokenizer.encode(CHECK_TEXT, add_special_tokens=True).ids
    return hashlib.sha256(str(list(ids)).encode()).hexdigest()


def resolve_pre(model_dir: Path, chkhsh: str, pre: str | None) -> str:
    """The user's pre-tokenizer name when given (checked), else the one the hash is known by."""
    if pre is not None:
        if pre not in KNOWN_PRE_NAMES:
            raise ConvertError(
                f"unknown BPE pre-tokenizer {pre!r}; llama.cpp knows: "
                + ", ".join(sorted(KNOWN_PRE_NAMES))
            )
        return pre
    name = KNOWN_PRE_HASHES.get(chkhsh)
    if name is None:
        raise ConvertError(
            f"{model_dir / 'tokenizer.json'}: BPE pre-tokenizer not recognized (hash {chkhsh}); "
            "name the one it matches with --gguf-pre NAME (pre=NAME), e.g. llama-bpe, qwen2, gpt-2"
        )
    return name


def _tokens_and_types(
    model_dir: Path, tokenizer: Any, config: Mapping[str, Any]
) -> tuple[list[str], list[int]]:
    """Each id's token text and GGUF type, padded to config.json's vocab_size as llama.cpp does."""
    vocab: dict[str, int] = tokenizer.get_vocab(with_added_tokens=True)
    vocab_size = config_vocab_size(model_dir, config, len(vocab))
    top = max(vocab.values(), default=-1)
    if top >= vocab_size:
        raise ConvertError(
            f"{model_dir / 'tokenizer.json'}: token id {top} is past config.json's "
            f"vocab_size {vocab_size}; the embedding has no row for it"
        )
    by_id = {token_id: text for text, token_id in vocab.items()}
    added = tokenizer.get_added_tokens_decoder()
    added_texts = {token.content for token in added.values()}
    tokens, types = [], []
    for token_id in range(vocab_size):
        text = by_id.get(token_id)
        if text is None:
            tokens.append(f"[PAD{token_id}]")
            types.append(int(gguf.TokenType.UNUSED))
        elif text in added_texts and token_id in added:
            text, kind = _added_token(tokenizer, added[token_id], text)
            tokens.append(text)
            types.append(kind)
        else:
            tokens.append(text)
            types.append(int(gguf.TokenType.NORMAL))
    return tokens, types


def _added_token(tokenizer: Any, token: Any, text: str) -> tuple[str, int]:
    """An added token's text (round-tripped when not normalized) and its control/user type."""
    if not token.normalized:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        text = tokenizer.decode(ids, skip_special_tokens=False)
    if token.special or looks_special(text):
        return text, int(gguf.TokenType.CONTROL)
    return text.replace(_SENTENCEPIECE_SPACE, " "), int(gguf.TokenType.USER_DEFINED)


def _bytelevel_add_flags(special: Any, tokenizer_json: Mapping[str, Any]) -> None:
    """Give a ByteLevel post-processor's add_bos/add_eos = false as llama.cpp's gguf-py does.

    Released gguf-py (0.19) predates this rule of the converter's own copy: a byte-level
    post-processor adds no BOS/EOS unless a later template processor says otherwise.
    """
    if hasattr(gguf.SpecialVocab, "_parse_normalizer"):
        return  # a gguf-py that already applies the rule
    post = tokenizer_json.get("post_processor") or {}
    processors = post.get("processors", [post])
    kinds = [processor.get("type") for processor in processors]
    if "ByteLevel" not in kinds:
        return
    flags = dict(special.add_special_token)
    template_set = {"TemplateProcessing", "RobertaProcessing"} & set(kinds)
    special.add_special_token = {"bos": False, "eos": False}
    for kind, value in flags.items():
        if template_set or kind not in special.add_special_token:
            special.add_special_token[kind] = value
